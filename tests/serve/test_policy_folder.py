"""mact serve on a LeRobot policy folder (tests/test_lerobot_policy.sh): one request on every protocol, each answer bit
for bit `mact run`'s with the same frames, task, state and seed. The LeRobot client names its front camera as a robot
would and maps it with rename_map, as LeRobot's robot client does.

usage: test_policy_folder.py MODEL TMP OPENPI_PORT ACT_PORT VLA_PORT LEROBOT_PORT PB_DIR"""
import asyncio, os, pickle, sys, time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

model, tmp = sys.argv[1], sys.argv[2]
P_OP, P_ACT, P_VLA, P_LR = (int(x) for x in sys.argv[3:7])
sys.path.insert(0, sys.argv[7])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lerobot_fake"))
import grpc  # noqa: E402
import lerobot_services_pb2 as pb  # noqa: E402
import lerobot_services_pb2_grpc as pbg  # noqa: E402
from lerobot_wire import chunks  # noqa: E402
from lerobot.async_inference.helpers import RemotePolicyConfig, TimedObservation  # noqa: E402

R = Report()
rng = np.random.default_rng(7)
task = "pick up the red cube"
dim = json.load(open(f"{model}/config.json"))["input_features"]["observation.state"]["shape"][0]
# a raw state the policy's processors accept: its last dim (the gripper) passes through and must lie in [-1, 1]
state = np.concatenate([rng.uniform(-30, 60, dim - 1), [0.25]]).astype(np.float32)
top, wrist = rng_frame(rng, 240, 320), rng_frame(rng, 120, 160)
paths = [save_frame(f"{tmp}/pf_top.npy", top), save_frame(f"{tmp}/pf_wrist.npy", wrist)]
ref = mact_run(model, paths, task, state, 11)

_, r = asyncio.run(openpi_infer(P_OP, {"observation/image": top, "observation/wrist_image": wrist,
                                       "observation/state": state, "prompt": task, "seed": 11}))
R.check("policy_folder_openpi_bitwise", bitwise_equal(r["actions"], ref), f"{r['actions'][:1]} vs {ref[:1]}")
r = act_post(P_ACT, {"external_cam": jn(top), "wrist_cam": jn(wrist), "instruction": task, "state": jn(state), "seed": 11})
R.check("policy_folder_act_bitwise", r.status_code == 200 and bitwise_equal(jn_dec(r.json()["actions"]), ref), r.text[:300])
ident = get(P_ACT, "/act").json()
R.check("policy_folder_act_identity", ident.get("norm_tag") == "policy" and ident.get("state_dim") == dim, str(ident)[:300])
rp = asyncio.run(vla_session(P_VLA, [("observation", {"images": {"agentview": top, "wrist": wrist},
                                                      "task_description": task, "states": state, "seed": 11})], fmt="raw"))
R.check("policy_folder_vla_eval_bitwise", bitwise_equal(rp[1]["payload"]["actions"], ref[0]), str(rp[1])[:200])

# LeRobot's async inference: the robot calls its cameras front and wrist; the checkpoint's saved rename_map (its
# rename_observations_processor) maps front to the policy's top when the client sends none
joints = [f"joint_{i}.pos" for i in range(dim)]
feats = {"observation.state": {"dtype": "float32", "shape": (dim,), "names": joints}}
for c in ("front", "wrist"):
    feats["observation.images." + c] = {"dtype": "image", "shape": (240, 320, 3), "names": ["height", "width", "channels"]}
raw = {k: float(v) for k, v in zip(joints, state)}
raw["front"], raw["wrist"], raw["task"] = top, wrist, task


def lerobot_chunk(cfg, timestep=0):
    ch = grpc.insecure_channel(f"127.0.0.1:{P_LR}", options=[("grpc.use_local_subchannel_pool", 1)])
    stub = pbg.AsyncInferenceStub(ch)
    stub.Ready(pb.Empty(), timeout=30)
    stub.SendPolicyInstructions(pb.PolicySetup(data=pickle.dumps(cfg)), timeout=30)
    stub.SendObservations(chunks(pickle.dumps(TimedObservation(timestamp=time.time(), timestep=timestep, observation=raw,
                                                               must_go=True))), timeout=30)
    got = pickle.loads(stub.GetActions(pb.Empty(), timeout=60).data)
    ch.close()
    return np.stack([x.action.numpy() for x in got]).astype(np.float32)


cfg = RemotePolicyConfig(policy_type="molmoact2", pretrained_name_or_path=model, lerobot_features=feats,
                         actions_per_chunk=4, device="cpu", rename_map={})
a = lerobot_chunk(cfg)
ref0 = mact_run(model, paths, task, state, 0, extra=("--n-action-steps", "4"))
R.check("policy_folder_lerobot_saved_rename_map_bitwise", bitwise_equal(a, ref0), f"{a[:1]} vs {ref0[:1]}")
# a LeRobot fork's RemotePolicyConfig: extra fields (fps, policy_config_overrides), the client's own rename_map, and a
# pretrained_name_or_path naming another checkpoint (never opened: the log says so)
cfg = RemotePolicyConfig(policy_type="molmoact2", pretrained_name_or_path="org/some-other-policy", lerobot_features=feats,
                         actions_per_chunk=4, device="cpu", rename_map={"observation.images.front": "observation.images.top"})
cfg.fps = 15
cfg.policy_config_overrides = ["--norm_tag=policy", "--policy.num_inference_steps=3", "--inference_action_mode=continuous",
                               "n_action_steps=3"]
a = lerobot_chunk(cfg)
ref3 = mact_run(model, paths, task, state, 0, extra=("--n-action-steps", "3", "--steps", "3"))
R.check("policy_folder_lerobot_fork_overrides_bitwise", bitwise_equal(a, ref3), f"{a[:1]} vs {ref3[:1]}")
log = open(sys.argv[8]).read()
R.check("policy_folder_lerobot_other_name_logged", "'org/some-other-policy' is not the loaded model" in log, log[-400:])
for bad, want in ((["--device=cuda"], "does not apply this override"), (["--inference_action_mode=discrete"], "continuous"),
                  (["--norm_tag=nosuch"], "unknown norm tag")):
    cfg.policy_config_overrides = bad
    try:
        lerobot_chunk(cfg)
        R.check(f"policy_folder_lerobot_override_refused_{bad[0]}", False, "accepted")
    except grpc.RpcError as e:
        R.check(f"policy_folder_lerobot_override_refused_{bad[0]}", e.code() == grpc.StatusCode.INVALID_ARGUMENT
                and want in (e.details() or ""), e.details())
sys.exit(1 if R.failed else 0)
