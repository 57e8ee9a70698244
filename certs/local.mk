# certs: the dev CA script berthd runs on first start
dist_pkgdata_SCRIPTS = certs/berth-mkcert certs/berth-fleet-cert
dist_pkgdata_DATA = certs/openssl.cnf
