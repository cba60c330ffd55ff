# The level the README's main command says things at: CARAML_LOG_LEVEL
# (DEBUG, INFO, WARNING or ERROR, or Python's number for one; INFO unless
# set), which aux/run_benchmarks.sh's -q (WARNING) and -v (DEBUG) set and
# pass on to the Python it runs (caraml/login/follow.py reads it through the
# standard logging module). Sourced by aux/setup.sh and aux/run_benchmarks.sh.

# The level as Python's logging numbers it; 1 and one line on stderr for a
# value that is none
caraml_log_level() {
    local given=${CARAML_LOG_LEVEL:-INFO}
    case "${given^^}" in
        DEBUG|10) echo 10 ;;
        INFO|20) echo 20 ;;
        WARNING|30) echo 30 ;;
        ERROR|40) echo 40 ;;
        *) echo "CARAML ERROR: CARAML_LOG_LEVEL=$given is no log level: give one of DEBUG INFO WARNING ERROR (or -q, -v)" >&2
           return 1 ;;
    esac
}

# Says its arguments on stdout where the level shows INFO, or DEBUG
caraml_info() { [ "$(caraml_log_level 2>/dev/null || echo 20)" -gt 20 ] || echo "$*"; }
caraml_debug() { [ "$(caraml_log_level 2>/dev/null || echo 20)" -gt 10 ] || echo "$*"; }
