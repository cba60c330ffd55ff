# Sourced by aux/setup.sh and aux/run_benchmarks.sh before JUBE starts.
# JUBE 2.5.1 runs every step as `bash -c "<command> && env > \"<work dir>/...\""`:
# inside those double quotes a " ends the string, $ and ` expand or run
# commands, and \ escapes; a line break splits what JUBE writes line by line.
# A checkout whose path holds one of these cannot be run safely by JUBE, so
# it is refused with one line; every other character is quoted by the suite.
caraml_check_checkout_path() {
    local path=$1 char name
    for char in '"' '$' '`' '\' $'\n'; do
        case "$path" in
            *"$char"*)
                name="'$char'"
                [ "$char" = $'\n' ] && name="a line break"
                echo "CARAML ERROR: the checkout path ${path//$'\n'/\\n} holds $name, which JUBE puts into a double-quoted shell line (it would end the quotes, expand or run a command); move the checkout to a path without \" \$ \` \\ or line breaks" >&2
                return 1
                ;;
        esac
    done
}
