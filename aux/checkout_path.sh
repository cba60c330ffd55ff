# Sourced by aux/setup.sh and aux/run_benchmarks.sh before JUBE starts, and
# run as a command by the first step of every benchmark script (platform.xml's
# path_check), so that `jube run` refuses what the main command refuses.
# JUBE 2.5.1 runs every step as `/bin/sh -c "<command> && env > \"<work dir>/...\""`:
# inside those double quotes a " ends the string, $ and ` expand or run
# commands, and \ escapes; a line break splits what JUBE writes line by line;
# and JUBE splits a parameter's value at its commas, the checkout's path
# (jube_benchmark_home) too. A checkout whose path holds one of these cannot
# be run safely by JUBE, so it is refused with one line; every other
# character is quoted by the suite.
caraml_check_checkout_path() {
    local path=$1 what=${2:-checkout} char name
    for char in '"' '$' '`' '\' $'\n' ','; do
        case "$path" in
            *"$char"*)
                name="'$char'"
                [ "$char" = $'\n' ] && name="a line break"
                if [ "$char" = , ]; then
                    echo "CARAML ERROR: the $what path $path holds ',', at which JUBE splits a value (the path would become two); move the $what to a path without commas" >&2
                else
                    echo "CARAML ERROR: the $what path ${path//$'\n'/\\n} holds $name, which JUBE puts into a double-quoted shell line (it would end the quotes, expand or run a command); move the $what to a path without \" \$ \` \\ or line breaks" >&2
                fi
                return 1
                ;;
        esac
    done
}

# As a command: bash aux/checkout_path.sh CHECKOUT RUN_FOLDER. It must fail
# before JUBE's `&& env > "<work dir>"` is read: a failed command ends the
# line there, and nothing of the path is ever run.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    root=$(cd "$1" && pwd) || exit 1
    caraml_check_checkout_path "$root" && caraml_check_checkout_path "$2" "run folder"
    exit
fi
