_aiscp() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    if [[ ${COMP_WORDS[COMP_CWORD]} == "=" ]]; then
        cur=""
        prev="${prev}="
    elif [[ ${prev} == "=" && ${COMP_CWORD} -ge 2 ]]; then
        prev="${COMP_WORDS[COMP_CWORD-2]}="
    fi
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="aiscp"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        aiscp)
            opts="-a -b -d -f -i -H -l -L -n -P -p -r -R -Z -s -S -t -T -u -v -x -q -h -V --archive --attributes-only --backup --copy-contents --force --interactive --link --dereference --no-clobber --no-dereference --preserve --no-preserve --parents --recursive --reflink --remove-destination --sparse --context --strip-trailing-slashes --symbolic-link --suffix --target-directory --no-target-directory --update --verbose --one-file-system --atomic --fsync --backend --gpu --route --chunk-size --streams --async --progress --no-progress --verify --debug --quiet --sums --sums-file --stats --doctor --serve --socket --allow-users --idle-exit --idle-release --help --version"
            if [[ ${cur} == -* ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --backup=)
                    COMPREPLY=($(compgen -W "none off simple never existing nil numbered t" -- "${cur}"))
                    return 0
                    ;;
                --preserve=)
                    COMPREPLY=($(compgen -W "mode timestamps ownership links context xattr all" -- "${cur}"))
                    return 0
                    ;;
                --no-preserve|--no-preserve=)
                    COMPREPLY=($(compgen -W "mode timestamps ownership links context xattr all" -- "${cur}"))
                    return 0
                    ;;
                --reflink=)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                --sparse|--sparse=)
                    COMPREPLY=($(compgen -W "never auto always" -- "${cur}"))
                    return 0
                    ;;
                --context=)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --suffix|--suffix=)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -S)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --target-directory|--target-directory=)
                    COMPREPLY=()
                    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
                        compopt -o plusdirs
                    fi
                    return 0
                    ;;
                -t)
                    COMPREPLY=()
                    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
                        compopt -o plusdirs
                    fi
                    return 0
                    ;;
                --update=)
                    COMPREPLY=($(compgen -W "all none none-fail older" -- "${cur}"))
                    return 0
                    ;;
                --backend|--backend=)
                    COMPREPLY=($(compgen -W "auto gpu hipfile cufile host" -- "${cur}"))
                    return 0
                    ;;
                --gpu|--gpu=)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --route|--route=)
                    COMPREPLY=($(compgen -W "auto library bounce" -- "${cur}"))
                    return 0
                    ;;
                --chunk-size|--chunk-size=)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --streams|--streams=)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify=)
                    COMPREPLY=($(compgen -W "bytes sums" -- "${cur}"))
                    return 0
                    ;;
                --sums=)
                    COMPREPLY=($(compgen -W "blake3 crc64nvme crc32c" -- "${cur}"))
                    return 0
                    ;;
                --sums-file|--sums-file=)
                    local oldifs
                    if [ -n "${IFS+x}" ]; then
                        oldifs="$IFS"
                    fi
                    IFS=$'\n'
                    COMPREPLY=($(compgen -f "${cur}"))
                    if [ -n "${oldifs+x}" ]; then
                        IFS="$oldifs"
                    fi
                    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
                        compopt -o filenames
                    fi
                    return 0
                    ;;
                --stats=)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --socket|--socket=)
                    local oldifs
                    if [ -n "${IFS+x}" ]; then
                        oldifs="$IFS"
                    fi
                    IFS=$'\n'
                    COMPREPLY=($(compgen -f "${cur}"))
                    if [ -n "${oldifs+x}" ]; then
                        IFS="$oldifs"
                    fi
                    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
                        compopt -o filenames
                    fi
                    return 0
                    ;;
                --allow-users|--allow-users=)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-exit|--idle-exit=)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-release|--idle-release=)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _aiscp -o nosort -o bashdefault -o default aiscp
else
    complete -F _aiscp -o bashdefault -o default aiscp
fi
