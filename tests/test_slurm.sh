#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# asan: skip (the scheduler's environment; eval's sharding runs under ASan in test_dataset_eval.sh)
# Sharded open-loop evaluation on a real scheduler: a one-node Slurm cluster (munged, slurmctld, slurmd),
# every path, key and port of it in a scratch folder, runs `mact eval` as an array job and `mact eval merge`
# as a job depending on it (the Slurm recipe of docs/cluster.md):
#   slurm_cluster          munged + slurmctld + slurmd start from the scratch folder's slurm.conf (free ports
#                          chosen at run time, no cgroups) and the node reaches idle
#   slurm_array_eval       sbatch --array=0-2 of `mact eval --policy model` (no --shard: eval takes its shard
#                          from SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT) and an afterok merge job all
#                          COMPLETED, each task on its shard i/3 (2 of the 6 episodes each)
#   slurm_array_offset_step  the same as --array=1-5:2 (ids 1, 3, 5): eval takes (ID - MIN) / STEP, so the
#                          tasks write the same episode files as shards 0, 1, 2 (its merge:
#                          slurm_merge_equal_offset_step)
#   slurm_merge_equal      the merge's result.json and episodes.jsonl == the unsharded run's, byte for byte
#                          (the unsharded run on 1 thread under taskset, the tasks on every CPU), every
#                          episode once; slurm_requeue_merge_equal: the same after the retry below
#   slurm_requeue_skips    `scontrol requeue` of task 1 after one of its episode files was removed (what a
#                          task killed mid-way leaves): only that episode is computed again (same bytes), the
#                          others are skipped (mtime kept), and a second merge is byte-equal again
# Needs root and munge + slurmctld + slurmd + slurm-client (scripts/setup.sh --test installs them; CI has them);
# without them it prints one INFO line and skips. Full tier (tests/run.sh, make test): ~7 s on 2 cores,
# ~40 s under ASan or MACT_KERNELS=ref.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s.%N)
MACT=$(realpath -m "${MACT_BIN:-build/mact}")
PY=${PYTHON:-/usr/bin/python3}
PATH="$PATH:/usr/sbin:/sbin"
missing=
for b in munged slurmctld slurmd sbatch squeue scontrol sinfo; do command -v "$b" >/dev/null 2>&1 || missing="$missing $b"; done
if [ -n "$missing" ]; then echo "INFO test_slurm: skipped, missing:$missing (CI must have them: scripts/setup.sh --test)"; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "INFO test_slurm: skipped, needs root (slurmd runs the jobs as SlurmdUser=root)"; exit 0; fi
[ -x "$MACT" ] || { echo "FAIL slurm_setup: $MACT missing (run make)"; exit 1; }
# this test may itself run inside a Slurm job or a Kubernetes pod: their shard variables must not reach eval
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_JOB_ID JOB_COMPLETION_INDEX JOB_COMPLETION_COUNT
for v in $(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p; s/^\(SBATCH_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

S=$(mktemp -d "${MACT_TMP:-/tmp}/slurm.XXXXXX")
export SLURM_CONF="$S/slurm.conf"
pids=()   # munged, slurmctld, slurmd: started in the foreground as children of this script
fails=0
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); [ -n "${3:-}" ] && for f in "${@:3}"; do [ -f "$f" ] && { echo "    --- $f"; tail -n 15 "$f" | sed 's/^/    /'; }; done; return 0; }
logs() {  # the daemons' logs; their stdout/stderr where a daemon stopped before opening its log
    local d
    for d in slurmctld slurmd; do [ -s "$S/$d.log" ] && echo "$S/$d.log" || echo "$S/$d.out"; done
    grep -qi error "$S/munged.log" 2>/dev/null && echo "$S/munged.log"
}
cleanup() {
    if [ ${#pids[@]} -gt 0 ] && [ -f "$SLURM_CONF" ]; then
        # only this cluster's jobs (SLURM_CONF names it); bounded in case slurmctld is gone or hung
        timeout 10 scancel --quiet --full --user=root >/dev/null 2>&1
        for _ in $(seq 20); do [ -z "$(timeout 5 squeue -h 2>/dev/null)" ] && break; sleep 0.25; done
    fi
    for ((k = ${#pids[@]} - 1; k >= 0; k--)); do kill "${pids[k]}" 2>/dev/null; done
    for p in "${pids[@]}"; do
        for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null
    done
    rm -rf "$S"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# --- munge: a fresh key and a daemon of our own (the socket is what slurm.conf's AuthInfo names)
dd if=/dev/urandom of="$S/munge.key" bs=1024 count=1 status=none && chmod 0400 "$S/munge.key"
# --force: the scratch folder is mode 0700, which munged refuses for a socket others could not reach
munged -F --force --key-file="$S/munge.key" --socket="$S/munge.socket" --pid-file="$S/munged.pid" \
    --log-file="$S/munged.log" --seed-file="$S/munged.seed" >"$S/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$S/munge.socket" ] && break; sleep 0.1; done
[ -S "$S/munge.socket" ] || { fail slurm_cluster "munged did not create its socket" "$S/munged.log" "$S/munged.out"; exit 1; }

# --- slurm.conf: two ports free now (bound together, so distinct; a clash with a concurrent run is retried)
H=$(hostname -s)
node=$(slurmd -C 2>/dev/null | sed -n 's/ RealMemory=[0-9]*//; /^NodeName=/p' | head -1)
[ -n "$node" ] || { fail slurm_cluster "slurmd -C printed no NodeName line"; exit 1; }
cpus=$(echo "$node" | sed -n 's/.* CPUs=\([0-9]*\).*/\1/p')
free_ports() { "$PY" -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])'; }
write_conf() {  # ctld_port slurmd_port
    mkdir -p "$S/state" "$S/spool"
    : >"$S/plugstack.conf"
    cat >"$SLURM_CONF" <<EOF
ClusterName=mact$$
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge.socket
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
PlugStackConfig=$S/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
ReturnToService=2
MinJobAge=600
KillWait=2
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=mact Nodes=$H Default=YES MaxTime=INFINITE State=UP
EOF
}
t_cluster=$(now); up=0
for attempt in 1 2 3; do
    read -r p1 p2 < <(free_ports) || { fail slurm_cluster "no free ports ($PY)"; exit 1; }
    write_conf "$p1" "$p2"
    slurmctld -D -i -f "$SLURM_CONF" >"$S/slurmctld.out" 2>&1 &
    ctld=$!; pids+=($ctld)
    slurmd -D -f "$SLURM_CONF" >"$S/slurmd.out" 2>&1 &
    sd=$!; pids+=($sd)
    for _ in $(seq 100); do  # 20 s
        st=$(sinfo -h -n "$H" -o %t 2>/dev/null)
        [ "$st" = idle ] && { up=1; break; }
        kill -0 "$ctld" 2>/dev/null || { st="$st; slurmctld exited"; break; }
        kill -0 "$sd" 2>/dev/null || { st="$st; slurmd exited"; break; }
        sleep 0.2
    done
    [ $up = 1 ] && break
    grep -qi 'address already in use' "$S"/slurmctld.* "$S"/slurmd.* 2>/dev/null || break
    echo "INFO test_slurm: ports $p1/$p2 taken by someone else, retrying"
    kill "$sd" "$ctld" 2>/dev/null; wait "$sd" "$ctld" 2>/dev/null
    pids=("${pids[0]}"); rm -rf "$S/state" "$S/spool" "$S"/slurmctld.* "$S"/slurmd.*
done
if [ $up = 1 ]; then
    echo "PASS slurm_cluster (node $H idle with $cpus CPUs after $(since "$t_cluster") s; ports $p1/$p2)"
else
    fail slurm_cluster "node $H not idle (within 20 s; sinfo: '${st:-nothing}')" $(logs); exit 1
fi

# --- data: 6 LIBERO-like episodes with PNG cameras, a tiny random checkpoint with the dataset's norm stats
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
DS="$S/lib"; CK="$S/ck"
{ "$MACT" synth-dataset "$DS" --version v3.0 --robot libero --episodes 6 --len 14:20 --seed "$SEED" &&
  "$MACT" synth tiny "$CK" --seed "$SEED" &&
  "$MACT" stats --dataset "$DS" --tag libero --out "$CK/norm_stats.json"; } >"$S/gen.log" 2>&1 ||
    { fail slurm_setup "dataset / checkpoint generation failed" "$S/gen.log"; exit 1; }
EVAL=("$MACT" eval --dataset "$DS" --model "$CK" --policy model --seed 3)
# the unsharded reference, on one thread where taskset exists (the tasks below run on every CPU)
one=(); threads="on every CPU"; command -v taskset >/dev/null 2>&1 && { one=(taskset -c 0); threads="on 1 thread (taskset -c 0)"; }
"${one[@]}" "${EVAL[@]}" --out "$S/out0" >"$S/out0.txt" 2>"$S/out0.err" ||
    { fail slurm_setup "unsharded eval failed" "$S/out0.err"; exit 1; }

# --- the array jobs and the merges depending on them
cat >"$S/eval_task.sh" <<EOF
#!/bin/bash
# eval_task.sh ROOT: one shard per array task into ROOT/<task id>; mact eval reads SLURM_ARRAY_TASK_* itself
echo "task \$SLURM_ARRAY_TASK_ID of \$SLURM_ARRAY_TASK_COUNT (min \$SLURM_ARRAY_TASK_MIN, step \${SLURM_ARRAY_TASK_STEP:-unset}) on \$(hostname -s), restart \${SLURM_RESTART_COUNT:-0}"
exec $(printf '%q ' "${EVAL[@]}") --out "\$1/\$SLURM_ARRAY_TASK_ID"
EOF
merge_job() {  # out_dir root "ids" [sbatch options...]: merges root/<id> for each id; prints the job id
    local out=$1 root=$2 ids=$3 dirs=() i; shift 3
    for i in $ids; do dirs+=("$root/$i"); done
    sbatch --parsable --job-name=mact-merge -o "$S/merge_%j.log" "$@" \
        --wrap "$(printf '%q ' "$MACT" eval merge --out "$out" "${dirs[@]}")"
}
wait_jobs() {  # timeout_s job...: until none of them is pending or running (1: timeout, or only jobs left
    # whose dependency can never be satisfied)
    local end q; end=$(awk -v t="$1" -v n="$(now)" 'BEGIN { printf "%.0f", n + t }'); shift
    while q=$(squeue -h -o '%i %r' -j "$(IFS=,; echo "$*")" 2>/dev/null); [ -n "$q" ]; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        echo "$q" | grep -vq ' DependencyNeverSatisfied$' || return 1
        sleep 0.2
    done
}
states() {  # job: "N STATE EXIT" per distinct state of its records (array tasks), ';'-joined
    scontrol show job -o "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*ExitCode=\([0-9:]*\).*/\1 \2/p' |
        sort | uniq -c | awk '{ printf "%s%s %s %s", (NR > 1 ? ";" : ""), $1, $2, $3 }'
}
t_jobs=$(now)
array() {  # --array=SPEC root: prints the job id
    sbatch --parsable "$1" --cpus-per-task=1 --job-name=mact-eval -o "$S/task_%A_%a.log" "$S/eval_task.sh" "$2"
}
# the recipe's array (ids 0..2), and one with an offset and a step (ids 1, 3, 5: shards (id - MIN) / STEP);
# eval creates its --out but not the parents
mkdir -p "$S/shards" "$S/shards_b"
J=$(array --array=0-2 "$S/shards" 2>"$S/sbatch.err") &&
M=$(merge_job "$S/merged" "$S/shards" "0 1 2" --dependency=afterok:"$J" 2>>"$S/sbatch.err") &&
JB=$(array --array=1-5:2 "$S/shards_b" 2>>"$S/sbatch.err") &&
MB=$(merge_job "$S/merged_b" "$S/shards_b" "1 3 5" --dependency=afterok:"$JB" 2>>"$S/sbatch.err") ||
    { fail slurm_array_eval "sbatch failed" "$S/sbatch.err"; exit 1; }
waited=
wait_jobs 120 "$J" "$M" "$JB" "$MB" || waited="; still queued after 120 s or on a failed dependency: $(squeue -h -o '%i %T %r' | paste -sd ';')"
sj=$(states "$J"); sm=$(states "$M")
ok=1; why=$waited
[ "$sj" = "3 COMPLETED 0:0" ] || { ok=0; why="$why; array job $J: $sj"; }
[ "$sm" = "1 COMPLETED 0:0" ] || { ok=0; why="$why; merge job $M: ${sm:-no record}"; }
for i in 0 1 2; do
    n=$(ls "$S/shards/$i/episodes" 2>/dev/null | wc -l)
    grep -q "mact eval: shard $i/3:" "$S/task_${J}_$i.log" 2>/dev/null && [ "$n" = 2 ] || { ok=0; why="$why; task $i: $n episodes, not shard $i/3"; }
done
if [ $ok = 1 ]; then
    echo "PASS slurm_array_eval (array job $J: 3 tasks COMPLETED, 2 episodes each, shard i/3 from SLURM_ARRAY_TASK_ID; merge job $M afterok COMPLETED)"
else
    fail slurm_array_eval "${why#; }" "$S"/task_${J}_*.log "$S"/merge_$M.log $(logs)
fi
sj=$(states "$JB"); sm=$(states "$MB")
ok=1; why=
[ "$sj" = "3 COMPLETED 0:0" ] || { ok=0; why="$why; array job $JB: $sj"; }
[ "$sm" = "1 COMPLETED 0:0" ] || { ok=0; why="$why; merge job $MB: ${sm:-no record}"; }
k=0
for i in 1 3 5; do
    n=$(ls "$S/shards_b/$i/episodes" 2>/dev/null | wc -l)
    diff -r "$S/shards_b/$i/episodes" "$S/shards/$k/episodes" >/dev/null 2>&1 && grep -q "mact eval: shard $k/3:" "$S/task_${JB}_$i.log" 2>/dev/null ||
        { ok=0; why="$why; task $i: $n episodes, not shard $k/3's"; }
    k=$((k + 1))
done
if [ $ok = 1 ]; then
    echo "PASS slurm_array_offset_step (--array=1-5:2: tasks 1, 3, 5 ran shards 0, 1, 2, the same episode files as --array=0-2; $(since "$t_jobs") s for both arrays and merges)"
else
    fail slurm_array_offset_step "${why#; }" "$S"/task_${JB}_*.log "$S"/merge_$MB.log
fi

# --- merged == unsharded
check_equal() {  # name merged_dir
    local cmpnote
    [ -f "$2/result.json" ] || { fail "$1" "no $2/result.json (the merge did not run)"; return; }
    if cmp -s "$2/result.json" "$S/out0/result.json" && cmp -s "$2/episodes.jsonl" "$S/out0/episodes.jsonl"; then cmpnote=byte-equal
    else cmpnote=different; fi
    local r
    r=$("$PY" - "$2" "$S/out0" "$DS" <<'EOF' 2>&1
import json, sys
m, u = (json.load(open(d + "/result.json")) for d in sys.argv[1:3])
eps = [json.loads(l)["episode_index"] for l in open(sys.argv[1] + "/episodes.jsonl")]
want = sorted(json.loads(l)["episode_index"] for l in open(sys.argv[2] + "/episodes.jsonl"))
def flat(x, p=""):
    if isinstance(x, dict):
        for k, v in x.items(): yield from flat(v, p + "." + k)
    elif isinstance(x, list):
        for i, v in enumerate(x): yield from flat(v, "%s[%d]" % (p, i))
    else: yield p, x
fm, fu = dict(flat(m)), dict(flat(u))
num = [k for k in fu if isinstance(fu[k], (int, float)) and not isinstance(fu[k], bool)]
diff = max((abs(fm[k] - fu[k]) for k in num if k in fm), default=0.0)
ok = fm.keys() == fu.keys() and all(fm[k] == fu[k] for k in fu) and eps == want == list(range(6))
print("%s %d values, max |merged - unsharded| %.3g, episodes %s, %d frames, MAE %.6g" %
      ("ok" if ok else "BAD", len(num), diff, ",".join(map(str, eps)), u["frames_evaluated"], u["mae"]))
EOF
)
    if [ "$cmpnote" = byte-equal ] && [ "${r%% *}" = ok ]; then
        echo "PASS $1 (result.json and episodes.jsonl $cmpnote to the unsharded run $threads; ${r#ok })"
    else
        fail "$1" "merged $cmpnote from unsharded: $r" "$S"/merge_*.log
    fi
}
check_equal slurm_merge_equal "$S/merged"
check_equal slurm_merge_equal_offset_step "$S/merged_b"

# --- retry: task 1 again after losing one finished episode; the others must be skipped
d1="$S/shards/1/episodes"
files=$(ls "$d1" 2>/dev/null)
gone=$(echo "$files" | head -1); kept=$(echo "$files" | tail -n +2)
if [ -z "$gone" ] || [ -z "$kept" ]; then fail slurm_requeue_skips "shard 1 has no episode files to retry"
else
    cp "$d1/$gone" "$S/gone.json" && rm "$d1/$gone"
    for f in $kept; do touch -d '2001-01-01 00:00:00' "$d1/$f"; done
    t_rq=$(now)
    # a requeued job waits on a begin time ~2 min ahead; StartTime=now makes it eligible at once
    scontrol requeue "${J}_1" >"$S/requeue.log" 2>&1 && scontrol update JobId="${J}_1" StartTime=now >>"$S/requeue.log" 2>&1 &&
        for _ in $(seq 50); do [ "$(scontrol show job -o "${J}_1" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')" = 1 ] && break; sleep 0.1; done &&
        wait_jobs 120 "${J}_1" && M2=$(merge_job "$S/merged2" "$S/shards" "0 1 2" --dependency=afterok:"$J" 2>>"$S/requeue.log") && wait_jobs 120 "$M2"
    rc=$?
    ok=1; why=
    [ $rc = 0 ] || { ok=0; why="$why; requeue / second merge did not finish (rc $rc)"; }
    info=$(scontrol show job -o "${J}_1" 2>/dev/null)
    for w in JobState=COMPLETED Restarts=1 ExitCode=0:0; do
        case "$info" in *" $w "*) ;; *) ok=0; why="$why; task 1 after requeue: no $w";; esac
    done
    cmp -s "$d1/$gone" "$S/gone.json" || { ok=0; why="$why; $gone not recomputed to the same bytes"; }
    for f in $kept; do [ "$(stat -c %Y "$d1/$f")" = "$(date -d '2001-01-01 00:00:00' +%s)" ] || { ok=0; why="$why; $f recomputed (not skipped)"; }; done
    grep -q "restart 1" "$S/task_${J}_1.log" 2>/dev/null || { ok=0; why="$why; the task's log shows no restart"; }
    np=$(grep -o "shard 1/3: [0-9]* episodes done" "$S/task_${J}_1.log" 2>/dev/null | wc -l)  # one per episode computed
    [ "$np" = 1 ] || { ok=0; why="$why; the rerun computed $np episodes, want 1"; }
    if [ $ok = 1 ]; then
        echo "PASS slurm_requeue_skips (task ${J}_1 requeued: $gone recomputed byte-equal, $(echo "$kept" | wc -w) finished episode skipped; second merge job $M2; $(since "$t_rq") s)"
    else
        fail slurm_requeue_skips "${why#; }" "$S/requeue.log" "$S/task_${J}_1.log" "$S/slurmctld.log"
    fi
    [ $ok = 1 ] && check_equal slurm_requeue_merge_equal "$S/merged2"
fi

echo "INFO test_slurm: wall time $(since "$T0") s (cluster start, 6-episode eval unsharded and as two 3-task arrays, merges, requeue, merge)"
[ $fails = 0 ]
