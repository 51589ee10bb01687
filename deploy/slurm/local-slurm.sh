#!/bin/bash
# A one-node SLURM cluster on this machine, to try dcfa's SLURM deployment on a laptop or in
# a container (tests/test_slurm.py starts and stops it with this script). Run as root:
#
#   sudo deploy/slurm/local-slurm.sh start [DIR]    # install if missing, configure, start
#   export SLURM_CONF=DIR/slurm.conf                # what `start` prints: sbatch, squeue, ...
#   deploy/slurm/local-slurm.sh status [DIR]        # sinfo and squeue
#   sudo deploy/slurm/local-slurm.sh stop [DIR]     # cancel every job, stop the daemons
#
# DIR (default /tmp/dcfa-local-slurm) holds everything: slurm.conf, the munge key and socket,
# the state, spool and log directories, and jobcomp.txt (one line per finished job). Nothing
# is written to /etc. `start` installs Debian/Ubuntu's slurm-wlm and munge with apt-get when
# they are missing (services are not started by the packages: policy-rc.d), generates a fresh
# munge key, writes a slurm.conf for this one node (its real hostname, CPUs and memory, from
# `slurmd -C`), starts munged, slurmctld and slurmd, and waits until the node is idle.
#
# The configuration needs no cgroups and no systemd, so it runs in containers:
# proctrack/linuxproc, task/none, jobacct_gather/none, no accounting database. Memory is
# consumable and a core can be shared by up to 4 jobs (select/cons_tres, CR_Core_Memory,
# OverSubscribe=FORCE:4), so the dcfa driver and its worker jobs fit on a small machine. Jobs
# run as the user who submits them.
#
# Environment: DCFA_SLURM_PORT (slurmctld's port, default 6817; slurmd uses the next one),
# DCFA_SLURM_PARTITION (default "debug").
set -euo pipefail

usage() {
    echo "usage: $0 start|stop|status|install [DIR]" >&2
    exit 2
}

ACTION="${1:-}"
DIR="$(realpath -m "${2:-/tmp/dcfa-local-slurm}")"
CONF="$DIR/slurm.conf"
CTLD_PORT="${DCFA_SLURM_PORT:-6817}"
SLURMD_PORT="$((CTLD_PORT + 1))"
PARTITION="${DCFA_SLURM_PARTITION:-debug}"
PACKAGES=(slurm-wlm munge)

say() { echo "local-slurm: $*"; }
die() {
    echo "local-slurm: error: $*" >&2
    exit 1
}

need_root() {
    [ "$(id -u)" = 0 ] || die "$ACTION needs root (slurmd runs jobs as their users; apt-get)"
}

installed() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
        command -v munged >/dev/null && command -v sinfo >/dev/null
}

install_packages() {
    installed && return 0
    command -v apt-get >/dev/null || die "slurm-wlm and munge are missing and there is no apt-get"
    say "installing ${PACKAGES[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    local policy=/usr/sbin/policy-rc.d made=""
    if [ ! -e "$policy" ]; then # the packages must not start system-wide daemons
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        made=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT # also if the install fails
    fi
    # a fresh machine's own apt run (at boot) may hold dpkg's lock: wait for it, not fail
    local get=(apt-get -o DPkg::Lock::Timeout=600)
    local apt=("${get[@]}" install -y -q --no-install-recommends "${PACKAGES[@]}")
    if ! "${apt[@]}"; then
        # stale or missing package lists (a fresh container): refresh and try again
        "${get[@]}" update -q || say "apt-get update reported errors; trying the install anyway"
        "${apt[@]}"
    fi
    if [ -n "$made" ]; then
        rm -f "$policy"
        trap - EXIT
    fi
    installed || die "slurmctld, slurmd, munged or sinfo still missing after apt-get install"
}

alive() { # a running process (a zombie, exited but not yet reaped, is not)
    local state
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

pid_of() { # the pid in a pid file, if that process is alive
    local file="$1" pid
    [ -s "$file" ] || return 1
    pid="$(cat "$file")"
    alive "$pid" || return 1
    echo "$pid"
}

write_config() {
    local node host cpus memory
    host="$(hostname -s)"
    # the hardware as slurmd sees it: NodeName=... CPUs=... RealMemory=...
    node="$(slurmd -C 2>/dev/null | grep -m1 '^NodeName=' || true)"
    if [ -z "$node" ]; then
        cpus="$(nproc)"
        memory="$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)"
        node="NodeName=$host CPUs=$cpus RealMemory=$memory"
    fi
    local jobcomp="jobcomp/none" plugin
    for plugin in /usr/lib/*/slurm-wlm/jobcomp_filetxt.so /usr/lib*/slurm/jobcomp_filetxt.so; do
        [ -e "$plugin" ] && jobcomp="jobcomp/filetxt" # a line per finished job: jobcomp.txt
    done
    cat >"$CONF" <<EOF
# written by deploy/slurm/local-slurm.sh: one node, no cgroups, no accounting database
ClusterName=dcfa-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=$jobcomp
JobCompLoc=$DIR/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=5
MinJobAge=600
MailProg=/bin/true
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
}

start() {
    need_root
    install_packages
    if pid_of "$DIR/run/slurmctld.pid" >/dev/null || pid_of "$DIR/run/slurmd.pid" >/dev/null; then
        die "already running in $DIR (stop it first: $0 stop $DIR)"
    fi
    mkdir -p "$DIR"/{munge,state,spool,log,run}
    chmod 755 "$DIR" "$DIR/munge" # the socket: every user who submits jobs talks to munged
    write_config
    export SLURM_CONF="$CONF"

    # munge: a fresh key (readable by root only) and its own socket; --force: run as root
    rm -f "$DIR/munge/munge.key"
    head -c 1024 /dev/urandom >"$DIR/munge/munge.key"
    chmod 400 "$DIR/munge/munge.key"
    # the daemons' own output goes to files: an inherited pipe would never be closed
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/munge/munged.seed" </dev/null >>"$DIR/log/daemons.out" 2>&1 ||
        fail "munged did not start"
    slurmctld -c -f "$CONF" </dev/null >>"$DIR/log/daemons.out" 2>&1 ||
        fail "slurmctld did not start"
    slurmd -f "$CONF" </dev/null >>"$DIR/log/daemons.out" 2>&1 || fail "slurmd did not start"

    local host state="" name deadline=$((SECONDS + 60))
    host="$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' "$CONF")"
    while [ "$state" != idle ]; do
        sleep 0.5
        for name in munged slurmctld slurmd; do # a daemon that exits right away: say why
            pid_of "$DIR/run/$name.pid" >/dev/null || fail "$name exited"
        done
        [ "$SECONDS" -lt "$deadline" ] || fail "node $host is '${state:-unknown}', not idle, after 60 s"
        state="$(timeout 5 sinfo -h -N -n "$host" -o %t 2>/dev/null || true)"
    done
    say "node $host idle; partition $PARTITION; port $CTLD_PORT; logs in $DIR/log"
    echo "export SLURM_CONF=$CONF"
}

fail() { # a daemon did not come up: show why, stop what did
    echo "local-slurm: error: $*" >&2
    for log in "$DIR"/log/*.log; do
        [ -f "$log" ] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
    done
    stop_daemons
    exit 1
}

stop_daemons() {
    local name file pid i
    for name in slurmd slurmctld munged; do
        file="$DIR/run/$name.pid"
        pid="$(pid_of "$file")" || continue
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            alive "$pid" || break
            sleep 0.2
        done
        if alive "$pid"; then
            say "$name ($pid) ignored SIGTERM for 20 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$file"
    done
}

stop() {
    need_root
    [ -f "$CONF" ] || die "no cluster in $DIR"
    export SLURM_CONF="$CONF"
    if pid_of "$DIR/run/slurmctld.pid" >/dev/null; then
        local jobs i
        mapfile -t jobs < <(timeout 10 squeue -h -o %i 2>/dev/null || true)
        if [ "${#jobs[@]}" -gt 0 ]; then
            say "cancelling jobs: ${jobs[*]}"
            timeout 10 scancel "${jobs[@]}" 2>/dev/null || true
            for ((i = 0; i < 120; i++)); do # KillWait (5 s) and the jobs' epilogue
                [ -z "$(timeout 10 squeue -h -o %i 2>/dev/null || true)" ] && break
                sleep 0.5
            done
        fi
    fi
    stop_daemons
    say "stopped ($DIR)"
}

status() {
    [ -f "$CONF" ] || die "no cluster in $DIR"
    export SLURM_CONF="$CONF"
    local name
    for name in munged slurmctld slurmd; do
        if pid="$(pid_of "$DIR/run/$name.pid")"; then
            say "$name running ($pid)"
        else
            say "$name not running"
        fi
    done
    sinfo
    squeue
}

case "$ACTION" in
start) start ;;
stop) stop ;;
status) status ;;
install) need_root && install_packages ;;
*) usage ;;
esac
