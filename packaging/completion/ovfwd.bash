# bash completion for ovfwd(8); installed as
# /usr/share/bash-completion/completions/ovfwd.
_ovfwd() {
	local cur prev cmd
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	cmd=${COMP_WORDS[1]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "run check import status reload kill drain pki probe lab bench version help" -- "$cur"))
		return
	fi
	case $prev in
	-c)
		COMPREPLY=($(compgen -f -X '!*.toml' -- "$cur") $(compgen -d -S / -- "$cur"))
		compopt -o nospace 2>/dev/null
		return
		;;
	-s)
		COMPREPLY=($(compgen -f -- "${cur:-/run/ovfwd}"))
		return
		;;
	-o | -ccd)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	-pid | -timeout | -deadline | -remote | -pci | -cert | -duration | -user | -port)
		return
		;;
	esac
	local flags=
	case $cmd in
	run) flags="-c" ;;
	import)
		if [[ $cur != -* ]]; then
			COMPREPLY=($(compgen -f -- "$cur"))
			return
		fi
		flags="-o -ccd -port"
		;;
	check)
		if [[ $cur != -* ]]; then
			COMPREPLY=($(compgen -f -X '!*.toml' -- "$cur") $(compgen -d -S / -- "$cur"))
			compopt -o nospace 2>/dev/null
			return
		fi
		flags="-c -user"
		;;
	status) flags="-s -c -json" ;;
	reload) flags="-s -c -pid -timeout" ;;
	kill) flags="-s -c -halt" ;;
	drain) flags="-s -c -deadline -cancel" ;;
	probe) flags="-pci" ;;
	pki)
		if [ "$COMP_CWORD" -eq 2 ]; then
			COMPREPLY=($(compgen -W "init client site revoke tls-crypt-v2" -- "$cur"))
		elif [ "$COMP_CWORD" -eq 3 ]; then
			COMPREPLY=($(compgen -d -- "$cur"))
		elif [ "${COMP_WORDS[2]}" = client ]; then
			COMPREPLY=($(compgen -W "-remote" -- "$cur"))
		elif [ "${COMP_WORDS[2]}" = revoke ]; then
			COMPREPLY=($(compgen -W "-cert" -- "$cur"))
		fi
		return
		;;
	bench)
		if [ "$COMP_CWORD" -eq 2 ]; then
			COMPREPLY=($(compgen -W "fwd vpn mlx5" -- "$cur"))
		fi
		return
		;;
	esac
	COMPREPLY=($(compgen -W "$flags" -- "$cur"))
}
complete -F _ovfwd ovfwd
