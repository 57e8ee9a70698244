# tests/integ: fragment of the top Makefile.am — berthd integration tests
# (real daemon, netctl, testapp, curl, Chromium on loopback; root). Each
# script prints TAP and exits 77 with a reason when it cannot run here.
INTEG_PROXY_TESTS = \
	tests/integ/proxy-basic.sh \
	tests/integ/proxy-errors.sh \
	tests/integ/proxy-stream.sh \
	tests/integ/proxy-smuggling.sh \
	tests/integ/proxy-signals.sh \
	tests/integ/proxy-h2.sh \
	tests/integ/browser-ws.sh
TESTS += $(INTEG_PROXY_TESTS)
EXTRA_DIST += $(INTEG_PROXY_TESTS) \
	tests/integ/lib.sh \
	tests/integ/proxy_tool.py \
	tests/integ/proxy_cdp.py \
	tests/integ/proxy_smuggling_gen.py \
	tests/smuggling
# browser-ws.sh leaves its screenshot here for humans.
CLEANFILES += tests/integ/browser-ws.png

# Fleet mode: three berthds in network namespaces and a real etcd
# (root, ip netns, etcd-server; about 40 s).
TESTS += tests/integ/fleet.sh
EXTRA_DIST += tests/integ/fleet.sh

# Fleet mode: a request at one host's edge wakes another host's microVM
# (root, qemu TCG, etcd-server; one boot).
TESTS += tests/integ/fleet-wake.sh
EXTRA_DIST += tests/integ/fleet-wake.sh

# The guest agent's protocol 2 without a VM: berth-agent on a socketpair,
# agent_tool.py the host (no root but for user switching; about 20 s).
TESTS += tests/integ/agent-proto.sh
EXTRA_DIST += tests/integ/agent-proto.sh tests/integ/agent_tool.py

# Hardening (issue 7): privilege separation probed from outside, and
# fault injection (root; netns and tmpfs where a test needs them).
INTEG_FAULT_TESTS = \
	tests/integ/privsep.sh \
	tests/integ/fault-disk.sh \
	tests/integ/fault-busy.sh \
	tests/integ/fault-upstream.sh \
	tests/integ/fault-kill.sh \
	tests/integ/fault-egress.sh
TESTS += $(INTEG_FAULT_TESTS)
EXTRA_DIST += $(INTEG_FAULT_TESTS)

# Overload: 503 past `limit connections`, 429 over the per-sandbox caps,
# a TLS handshake flood beside an established connection (root; ~40 s).
TESTS += tests/integ/proxy-overload.sh
EXTRA_DIST += tests/integ/proxy-overload.sh tests/integ/load_tool.py
EXTRA_DIST += tests/integ/h2raw.py tests/integ/h2attack.py tests/integ/h2hold.py

# Slow clients: slowhttptest (slow headers, body, read; 1000 connections
# each) beside a normal client; memory bound and availability (root;
# ~4 min). The 2x p99 target is `make bench-slowclients`.
TESTS += tests/integ/proxy-slowclients.sh
EXTRA_DIST += tests/integ/proxy-slowclients.sh

# berthd under valgrind: 10 000 requests, SIGHUP reloads, sandbox churn;
# no errors and no definite leaks in the parent or the workers (root,
# valgrind; ~2 min; skips in the ASan build).
TESTS += tests/integ/proxy-valgrind.sh
EXTRA_DIST += tests/integ/proxy-valgrind.sh

# Issue 14: `make install` into a fresh prefix, source and build trees
# deleted; the generated systemd unit verified and its ExecStart run by
# hand (the unit's umask, capabilities, no_new_privs; own netns); the
# installed berthd builds its template and boots a VM that survives a
# restart (KillMode=process); a failing template builder with vmm auto
# leaves VMs off with the reason (root, qemu TCG; one boot).
TESTS += tests/integ/install.sh
EXTRA_DIST += tests/integ/install.sh

# Issue 31, item 3: a template from an image root and its config
# (mktemplate-image): exec's defaults from the image's Env, WorkingDir and
# User, its Entrypoint + Cmd a service answering through berthd over TLS,
# suspend/resume, stop/start, an image without Cmd (root, qemu TCG;
# three boots, one at a time).
TESTS += tests/integ/vm-image.sh
EXTRA_DIST += tests/integ/vm-image.sh
# Issue 31's in-guest image build (vmm/guest/berth-imagebuild) in a
# debian builder sandbox: a Dockerfile FROM scratch, its docker save
# archive and OCI layouts give one file tree; failing and crafted input
# (root, qemu TCG; one boot).
TESTS += tests/integ/vm-imagebuild.sh
EXTRA_DIST += tests/integ/vm-imagebuild.sh
# Issue 31 through berthd: netctl template build --dockerfile, the
# builder sandbox, the template serving its CMD over TLS, the cache, a
# new version beside one in use, a failing step, the build timeout and
# the context limit (root, qemu TCG; a ready snapshot and four builders).
TESTS += tests/integ/vm-template-build.sh
EXTRA_DIST += tests/integ/vm-template-build.sh
# Issue 31's host side with a stand-in builder (no boots): the source
# streamed, template ls, the cache, MCP's build_template, failures,
# the timeout, the context limit, bad requests.
TESTS += tests/integ/template-source.sh
EXTRA_DIST += tests/integ/template-source.sh
# Issue 32's OpenAPI description: served, printed and installed alike,
# whole, every operation a route of the server, every error of the
# Error schema's shape (no VMs).
TESTS += tests/integ/openapi.sh
EXTRA_DIST += tests/integ/openapi.sh

# Issue 32, item 3: the Python SDK (netctl/sdk/python) against a real
# berthd: its unittest suite as TAP (external sandboxes: ports fetched
# through berthd, egress, tokens over TLS, typed errors; one shared
# minimal microVM: exec and the streamed exec, a detached server on its
# published port, 100 MB streamed with bounded client memory, watch,
# fork and checkpoint refused, suspend and the waking exec), the README's example
# as written, and pip install --no-build-isolation (root, qemu TCG).
TESTS += tests/integ/sdk-python.sh
EXTRA_DIST += tests/integ/sdk-python.sh \
	netctl/sdk/python/README.md netctl/sdk/python/pyproject.toml \
	netctl/sdk/python/bench_exec.py netctl/sdk/python/berth/__init__.py \
	netctl/sdk/python/berth/client.py netctl/sdk/python/berth/errors.py \
	netctl/sdk/python/berth/execs.py netctl/sdk/python/berth/files.py \
	netctl/sdk/python/berth/sandbox.py netctl/sdk/python/berth/py.typed \
	netctl/sdk/python/tests/_env.py netctl/sdk/python/tests/tap.py \
	netctl/sdk/python/tests/test_api.py \
	netctl/sdk/python/tests/test_unit.py \
	netctl/sdk/python/tests/test_vm.py

# Issue 32, item 4: the TypeScript SDK (netctl/sdk/js, @berth/sdk) built
# with tsc, packed and installed with npm, its node --test suites against
# an API-only berthd (external sandboxes: a published port, egress, a
# sandbox token refused elsewhere, typed errors) and one real VM (exec
# and its streams, a detached server on its port, a 100 MB file round
# trip with bounded memory, watch, suspend and wake), and the README's
# example as written (root, node and tsc, qemu TCG; one boot and the
# example's).
TESTS += tests/integ/sdk-js.sh
EXTRA_DIST += tests/integ/sdk-js.sh \
	netctl/sdk/js/.gitignore \
	netctl/sdk/js/README.md \
	netctl/sdk/js/bench_exec.mjs \
	netctl/sdk/js/package.json \
	netctl/sdk/js/tsconfig.json \
	netctl/sdk/js/src/client.ts \
	netctl/sdk/js/src/errors.ts \
	netctl/sdk/js/src/exec.ts \
	netctl/sdk/js/src/index.ts \
	netctl/sdk/js/src/node.d.ts \
	netctl/sdk/js/src/sandbox.ts \
	netctl/sdk/js/test/api.test.mjs \
	netctl/sdk/js/test/common.mjs \
	netctl/sdk/js/test/localhost.cjs \
	netctl/sdk/js/test/reporter.mjs \
	netctl/sdk/js/test/vm.test.mjs

# Fleet placement: three VM hosts on loopback with one etcd and different
# room; creates through one host land where the rule says, --host, --zone,
# 507 for a full zone and a full fleet, the next host after a kill -9
# (root, etcd, qemu TCG; five boots).
TESTS += tests/integ/fleet-place.sh
EXTRA_DIST += tests/integ/fleet-place.sh

# Issue 32: both SDKs' forks and checkpoints on ONE Debian sandbox made
# from its template's ready snapshot (one ready build, then restores
# only): the Python suite's tests/test_fork.py and the TypeScript one's
# test/fork.test.mjs (a fork has the file and its own exec, writes kept
# apart, the fork's and the sandbox's own tokens, a checkpoint taken,
# listed, restored in place and made into a sandbox, typed errors with
# the API's code and field), then nothing left and no sandbox booted
# (root, qemu TCG, mmdebstrap or the template cache; node and tsc for
# the TypeScript part).
TESTS += tests/integ/sdk-fork.sh
EXTRA_DIST += tests/integ/sdk-fork.sh \
	netctl/sdk/python/tests/test_fork.py \
	netctl/sdk/js/test/fork.test.mjs

# Fleet mode: a suspended microVM sandbox moves between two hosts (root,
# qemu TCG, etcd-server; a boot, three moves).
TESTS += tests/integ/fleet-move.sh
EXTRA_DIST += tests/integ/fleet-move.sh tests/integ/fleet-vm.sh

# Fleet mode: the default sandbox, Debian, moves running a -> b and
# suspended back (root, qemu TCG, etcd-server, the template cache or
# mmdebstrap; one boot: a's ready snapshot; the normal pass only).
TESTS += tests/integ/fleet-move-debian.sh
EXTRA_DIST += tests/integ/fleet-move-debian.sh

# Issue 32's last gap: both SDKs' admin calls (templates, tokens, the
# global policy, every port, the OpenAPI document, fleet mode's views),
# run by sdk-python.sh and sdk-js.sh on their API-only berthd; template
# builds followed to their end where a VMM runs (a stand-in builder: no
# VM boots for them).
EXTRA_DIST += netctl/sdk/python/berth/admin.py \
	netctl/sdk/python/tests/test_admin.py \
	netctl/sdk/js/src/admin.ts \
	netctl/sdk/js/test/admin.test.mjs \
	netctl/sdk/js/test/build.test.mjs
