# contrib: fragment of the top Makefile.am — the systemd unit and
# netctl's bash completion.
# SPDX-License-Identifier: GPL-2.0-or-later

# contrib/berthd.service: berthd.service.in with this build's directories
# (made by make, not config.status, so that @sbindir@ is a path and not
# "${exec_prefix}/sbin"); installed in $(systemdsystemunitdir) unless
# configure --with-systemdsystemunitdir=no, built either way.
if INSTALL_SYSTEMD_UNIT
systemdsystemunit_DATA = contrib/berthd.service
else
noinst_DATA = contrib/berthd.service
endif
EXTRA_DIST += contrib/berthd.service.in
CLEANFILES += contrib/berthd.service
contrib/berthd.service: $(top_srcdir)/contrib/berthd.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) contrib && \
	sed -e 's|@sbindir[@]|$(sbindir)|g' \
	    -e 's|@sysconfdir[@]|$(sysconfdir)|g' \
	    -e 's|@berthstatedir[@]|$(berthstatedir)|g' \
	    -e 's|@unitstatedir[@]|$(unitstatedir)|g' \
	    -e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' \
	    $(top_srcdir)/contrib/berthd.service.in >$@.tmp && \
	if grep -n '@[a-zA-Z_]*@' $@.tmp; then \
	  echo "$@: unsubstituted variables" >&2; rm -f $@.tmp; exit 1; \
	fi && mv -f $@.tmp $@

# bash-completion loads completions/<command> on demand; it searches
# $XDG_DATA_DIRS, which has /usr/local/share and /usr/share.
bashcompletiondir = $(datadir)/bash-completion/completions
EXTRA_DIST += contrib/netctl.bash
install-data-local: install-bash-completion
uninstall-local: uninstall-bash-completion
install-bash-completion:
	$(MKDIR_P) '$(DESTDIR)$(bashcompletiondir)'
	$(INSTALL_DATA) $(top_srcdir)/contrib/netctl.bash '$(DESTDIR)$(bashcompletiondir)/netctl'
uninstall-bash-completion:
	rm -f '$(DESTDIR)$(bashcompletiondir)/netctl'
.PHONY: install-bash-completion uninstall-bash-completion
