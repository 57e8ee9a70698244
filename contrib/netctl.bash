# bash completion for netctl(8)
# SPDX-License-Identifier: GPL-2.0-or-later
_netctl()
{
	local cur prev words cword
	_init_completion 2>/dev/null || {
		cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
		words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
	}
	local nouns="sandbox port egress policy token template fleet status mcp help"
	local globals="--json --state-dir --url --token --cacert --help"
	case $prev in
	-s|--state-dir|--cacert) COMPREPLY=($(compgen -f -- "$cur")); return;;
	--host-header) COMPREPLY=($(compgen -W "preserve upstream" -- "$cur")); return;;
	--default-mode|--max-mode) COMPREPLY=($(compgen -W "open allowlist closed" -- "$cur")); return;;
	--idle-pause|--idle-suspend|--max-lifetime) COMPREPLY=($(compgen -W "never default" -- "$cur")); return;;
	--url|--token|--address|--host|--ttl|--name|--deny|--allow|--permit|--max-rules|--conn-limit|--new-conn-rate|--memory|--vcpus|--disk|--template|--env|--timeout|--ring|--offset|--limit|--mode|--length) return;;
	--signal) COMPREPLY=($(compgen -W "TERM KILL INT HUP QUIT USR1 USR2 STOP CONT" -- "$cur")); return;;
	--cwd) COMPREPLY=($(compgen -d -- "$cur")); return;;
	esac
	local i noun= verb=
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-s|--state-dir|--url|--token|--cacert|--address|--host|--host-header|--ttl|--sandbox|--name|--default-mode|--max-mode|--deny|--allow|--permit|--max-rules|--conn-limit|--new-conn-rate|--memory|--vcpus|--disk|--template|--idle-pause|--idle-suspend|--max-lifetime|--env|--cwd|--timeout|--user|--ring|--signal|--offset|--limit|--mode|--length) ((i++));;
		-*) ;;
		*) if [[ -z $noun ]]; then noun=${words[i]}; elif [[ -z $verb ]]; then verb=${words[i]}; fi;;
		esac
	done
	if [[ -z $noun ]]; then
		COMPREPLY=($(compgen -W "$nouns $globals" -- "$cur")); return
	fi
	if [[ -z $verb ]]; then
		case $noun in
		sandbox) COMPREPLY=($(compgen -W "add create ls show set pause suspend resume start stop restart rm events exec cp console ps logs kill wait attach files mkdir mv cat watch" -- "$cur"));;
		template) COMPREPLY=($(compgen -W "ls add build rm" -- "$cur"));;
		fleet) COMPREPLY=($(compgen -W "hosts" -- "$cur"));;
		port) COMPREPLY=($(compgen -W "publish unpublish ls" -- "$cur"));;
		egress) COMPREPLY=($(compgen -W "show allow deny rm mode reset log" -- "$cur"));;
		policy) COMPREPLY=($(compgen -W "show set" -- "$cur"));;
		token) COMPREPLY=($(compgen -W "create ls rotate revoke" -- "$cur"));;
		mcp) COMPREPLY=($(compgen -W "--sandbox" -- "$cur"));;
		help) COMPREPLY=($(compgen -W "sandbox port egress policy token template fleet status mcp" -- "$cur"));;
		esac
		return
	fi
	case "$noun $verb" in
	"port publish") COMPREPLY=($(compgen -W "--private --public --host --host-header" -- "$cur"));;
	"egress allow"|"egress deny") COMPREPLY=($(compgen -W "--ttl" -- "$cur"));;
	"egress mode") COMPREPLY=($(compgen -W "open allowlist closed default" -- "$cur"));;
	"egress rm") COMPREPLY=($(compgen -W "allow deny" -- "$cur"));;
	"policy set") COMPREPLY=($(compgen -W "--default-mode --max-mode --deny --allow --permit --max-rules --conn-limit --new-conn-rate" -- "$cur"));;
	"token create") COMPREPLY=($(compgen -W "--admin --sandbox --name" -- "$cur"));;
	"sandbox add"|"sandbox create") COMPREPLY=($(compgen -W "--address --memory --vcpus --disk --template --idle-pause --idle-suspend --max-lifetime" -- "$cur"));;
	"sandbox set") COMPREPLY=($(compgen -W "--idle-pause --idle-suspend --max-lifetime" -- "$cur"));;
	"template add") COMPREPLY=($(compgen -d -- "$cur"));;
	"sandbox exec") COMPREPLY=($(compgen -W "--user --tty --env --cwd --timeout --detach --keep-awake --ring --" -- "$cur"));;
	"sandbox logs") COMPREPLY=($(compgen -W "--follow --offset" -- "$cur"));;
	"sandbox attach") COMPREPLY=($(compgen -W "--offset" -- "$cur"));;
	"sandbox kill") COMPREPLY=($(compgen -W "--signal" -- "$cur"));;
	"sandbox cp") COMPREPLY=($(compgen -f -- "$cur"));;
	"sandbox files") COMPREPLY=($(compgen -W "--limit" -- "$cur"));;
	"sandbox mkdir") COMPREPLY=($(compgen -W "--parents --mode" -- "$cur"));;
	"sandbox rm") COMPREPLY=($(compgen -W "--recursive" -- "$cur"));;
	"sandbox mv") COMPREPLY=($(compgen -W "--overwrite" -- "$cur"));;
	"sandbox cat") COMPREPLY=($(compgen -W "--offset --length" -- "$cur"));;
	"sandbox watch") COMPREPLY=($(compgen -W "--recursive" -- "$cur"));;
	"template build") COMPREPLY=($(compgen -W "debian minimal" -- "$cur"));;
	"egress log") COMPREPLY=($(compgen -W "--follow" -- "$cur"));;
	esac
}
complete -F _netctl netctl
