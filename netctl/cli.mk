# netctl: fragment of the top Makefile.am — the netctl command-line client
# of the control API (blocking HTTP/1.1 over the unix socket).
bin_PROGRAMS += netctl/netctl
netctl_netctl_SOURCES = netctl/netctl.c netctl/cli_cmd.h netctl/cli_util.c \
	netctl/cli_sandbox.c netctl/cli_exec.c netctl/cli_files.c \
	netctl/cli_port.c netctl/cli_egress.c netctl/cli_token.c \
	netctl/cli_template.c \
	netctl/cli_http.c netctl/cli.h netctl/cli_mcp.c \
	vmm/proto/agent_proto.h vmm/proto/valid.c vmm/proto/valid.h \
	vmm/proto/sandbox_fields.h
netctl_netctl_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(OPENSSL_CFLAGS)
netctl_netctl_LDADD = $(JANSSON_LIBS) $(HTTP_PARSER_LIBS) $(OPENSSL_LIBS)
