"""TrainerWorker ranks as real Ray actors on the tiny model: a step, a weight push, checkpoint resume, FSDP2
over gloo agreeing with one process; and the pure backend choice for every device."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import ray
import torch
from rollout_support import TINY, tiny_checkpoint
from trajectory_factory import TurnSpec, make_trajectory

from actors.trainer import TrainerActor, create_trainer_group, lr_at
from actors.weight_sync import ActorReplicas
from drkernel.config.train import TrainConfig
from drkernel.devices import DeviceUnavailable
from drkernel.model.weights import state_checksum, unpack_into
from drkernel.train.backend import choose_backend
from drkernel.train.checkpoint import IncompatibleCheckpoint
from drkernel.types.group import FinishedGroup
from drkernel.types.trajectory import Trajectory

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import a test module

OK = dict(correct=True, reward=1.5, speedup=0.5, coverage=0.9)
CPU_ONLY = {"cpu": True, "cuda": False, "npu": False}


def test_backend_choice_per_device_and_rank_count():
    assert choose_backend("auto", 1, CPU_ONLY) == choose_backend("cpu", 1, CPU_ONLY)
    single = choose_backend("cpu", 1, CPU_ONLY)
    assert (single.device, single.dist_backend, single.fsdp) == ("cpu", None, False)
    mixed = choose_backend("cpu", 1, CPU_ONLY, fsdp_policies=True)  # mixed precision or offload: FSDP2 on one rank
    assert (mixed.dist_backend, mixed.fsdp, mixed.world_size) == ("gloo", True, 1)
    gloo = choose_backend("auto", 2, CPU_ONLY)
    assert (gloo.device, gloo.dist_backend, gloo.fsdp) == ("cpu", "gloo", True)
    gpus = {"cpu": True, "cuda": True, "npu": False}
    assert choose_backend("auto", 8, gpus).dist_backend == "nccl" and choose_backend("auto", 8, gpus).fsdp
    assert choose_backend("cpu", 2, gpus).dist_backend == "gloo"
    npus = {"cpu": True, "cuda": False, "npu": True}
    assert (choose_backend("auto", 4, npus).device, choose_backend("auto", 4, npus).dist_backend) == ("npu", "hccl")
    with pytest.raises(DeviceUnavailable, match="'cuda' requested but not available"):
        choose_backend("cuda", 2, CPU_ONLY)
    with pytest.raises(ValueError, match="world size"):
        choose_backend("cpu", 0, CPU_ONLY)
    assert [lr_at(s, 1.0, 4) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0] and lr_at(0, 0.1, 0) == 0.1


@ray.remote(num_cpus=0)
class Replica:
    """A stand-in policy replica holding the tiny model's parameters (the publisher's receiving contract)."""

    def __init__(self, model_path: str) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(model_path)

    def load_weights(self, version, bucket_refs, manifest):
        unpack_into(self.model.state_dict(), ray.get(bucket_refs), manifest)
        return {"version": version, "replica": "r0"}

    def state_checksum(self) -> str:
        return state_checksum(self.model.state_dict())

    def logprobs(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        """What the sampler now assigns to each response token."""
        ids = torch.tensor([prompt_ids + response_ids])
        with torch.no_grad():
            logits = self.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
        return torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt_ids) :, None])[:, 0].tolist()


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny"))


def _config(tmp, **trainer) -> TrainConfig:
    return TrainConfig.model_validate(
        {
            "model": TINY,
            "queue": {"groups_per_step": 1},
            "rollout": {"samples_per_prompt": 3, "max_turns": 2, "temperature": 1.0},
            "trainer": {"lr": 1e-2, "micro_batch_size": 2, "device": "cpu", "output_dir": str(tmp), **trainer},
            "algorithm": {"mrs": {"mode": None, "veto_threshold": None}},  # synthetic engine log-probs are made up
        }
    )


def _groups(tag: str):
    return [
        make_trajectory(tag, i, [TurnSpec(tokens=4), TurnSpec(tokens=3, **(OK if i == 0 else {}))]) for i in range(3)
    ]


def test_step_push_checkpoint_and_resume(ray_cluster, model_path, tmp_path):
    """A step moves the weights; a push delivers them whole and advances the version on rank 0, its one owner,
    which tells the queue itself; a resumed rank restores weights, optimizer and version, and pushes them again
    under that version to a replica that started on version 0."""
    from actors.trajectory_queue import TrajectoryQueue

    cfg = _config(tmp_path)
    (trainer,) = create_trainer_group(cfg, model_path)
    before = ray.get(trainer.checksum.remote())
    metrics = ray.get(trainer.train_step.remote(ray.put(_groups("a"))))  # an ObjectRef arrives resolved
    assert metrics["train/stepped"] == 1.0 and metrics["trainer/step"] == 1.0 and metrics["train/grad_norm"] > 0
    assert metrics["rollout/correct_rate"] > 0 and "train/entropy" in metrics and "train/clip_fraction" in metrics
    after = ray.get(trainer.checksum.remote())
    assert after != before

    replica, queue = Replica.remote(model_path), TrajectoryQueue.remote(cfg.queue, 1)
    ray.get(trainer.attach_policy.remote(ActorReplicas([replica]), queue))
    push = ray.get(trainer.publish_weights.remote())
    assert push["trainer/version"] == 1.0 and push["weight_sync/replicas"] == 1.0
    assert ray.get(replica.state_checksum.remote()) == after  # bit-identical, every name present
    assert ray.get(queue.stats.remote())["version"] == 1  # told by rank 0, no driver in between

    skipped = ray.get(trainer.train_step.remote([make_trajectory("flat", i, [TurnSpec()]) for i in range(3)]))
    assert skipped["train/stepped"] == 0.0  # constant rewards: filtered, no update
    path = ray.get(trainer.save_checkpoint.remote(str(tmp_path / "ckpt"), {"cursor": 7}))

    resumed = TrainerActor.remote(cfg.model_dump(mode="json"), model_path)
    ray.get(resumed.setup.remote())
    assert ray.get(resumed.load_checkpoint.remote(path)) == {"cursor": 7}
    assert ray.get(resumed.info.remote()) == ray.get(trainer.info.remote())
    assert ray.get(resumed.checksum.remote()) == after
    fresh, fresh_queue = Replica.remote(model_path), TrajectoryQueue.remote(cfg.queue, 1)
    ray.get(resumed.attach_policy.remote(ActorReplicas([fresh]), fresh_queue))
    assert ray.get(resumed.republish.remote()) == 1  # the saved version, not a new one
    assert ray.get(fresh.state_checksum.remote()) == after and ray.get(fresh_queue.stats.remote())["version"] == 1
    assert ray.get(resumed.info.remote())["version"] == 1
    step = _groups("b")
    m1, m2 = ray.get([trainer.train_step.remote(step), resumed.train_step.remote(step)])
    assert m1["train/stepped"] == m2["train/stepped"] == 1.0
    assert ray.get(trainer.checksum.remote()) == ray.get(resumed.checksum.remote())  # optimizer state came back

    other = _config(tmp_path, lr=0.5)
    refusing = TrainerActor.remote(other.model_dump(mode="json"), model_path)
    ray.get(refusing.setup.remote())
    with pytest.raises(IncompatibleCheckpoint, match="trainer.lr: checkpoint 0.01, now 0.5"):
        ray.get(refusing.load_checkpoint.remote(path))
    for actor in (trainer, resumed, refusing, replica, queue, fresh, fresh_queue):
        ray.kill(actor)


def test_fsdp2_over_gloo_matches_one_process(ray_cluster, model_path, tmp_path):
    steps = [_groups("a"), _groups("b")]
    sums, norms = {}, {}
    for world in (1, 2):
        ranks = create_trainer_group(_config(tmp_path, num_workers=world, cpus_per_worker=0.5), model_path)
        info = ray.get([r.info.remote() for r in ranks])
        assert [i["world_size"] for i in info] == [world] * world
        for groups in steps:
            metrics = ray.get([r.train_step.remote(groups) for r in ranks])
            assert all(m["train/stepped"] == 1.0 for m in metrics)
            norms.setdefault(world, []).append(metrics[0]["train/grad_norm"])  # Adam hides a gradient scale error
        states = ray.get([r.state_dict_for_push.remote() for r in ranks])
        assert all(s is None for s in states[1:])
        sums[world] = states[0]
        ray.get([r.shutdown.remote() for r in ranks])
        for r in ranks:
            ray.kill(r)
    assert norms[2] == pytest.approx(norms[1], rel=1e-4)
    assert sums[1].keys() == sums[2].keys()
    for name in sums[1]:
        torch.testing.assert_close(sums[2][name], sums[1][name], rtol=1e-4, atol=1e-5, msg=name)


def test_two_rank_shards_resume_on_one_rank(ray_cluster, model_path, tmp_path):
    """Each rank writes its own shard; one rank loads both (DCP reshards) and steps as the two ranks do."""
    two = create_trainer_group(_config(tmp_path, num_workers=2, cpus_per_worker=0.5), model_path)
    assert all(m["train/stepped"] == 1.0 for m in ray.get([r.train_step.remote(_groups("a")) for r in two]))
    paths = ray.get([r.save_checkpoint.remote(str(tmp_path / "ckpt"), {"cursor": 3}) for r in two])
    assert paths[1] is None
    assert sorted(p.name for p in (Path(paths[0]) / "state").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    saved = ray.get([r.checksum.remote() for r in two])[0]
    ray.get([r.train_step.remote(_groups("b")) for r in two])
    stepped = ray.get([r.state_dict_for_push.remote() for r in two])[0]
    ray.get([r.shutdown.remote() for r in two])

    (one,) = create_trainer_group(_config(tmp_path, num_workers=1), model_path)
    assert ray.get(one.load_checkpoint.remote(paths[0])) == {"cursor": 3}
    assert ray.get(one.checksum.remote()) == saved
    ray.get(one.train_step.remote(_groups("b")))  # Adam's moments came back: the next step lands where 2 ranks' did
    resumed = ray.get(one.state_dict_for_push.remote())
    for name in stepped:
        torch.testing.assert_close(resumed[name], stepped[name], rtol=1e-4, atol=1e-5, msg=name)
    for actor in (*two, one):
        ray.kill(actor)


def _holds_trajectories(value) -> bool:
    if isinstance(value, (FinishedGroup, Trajectory)):
        return True
    if isinstance(value, dict):
        return any(_holds_trajectories(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_trajectories(v) for v in value)
    return False


def test_rank_zero_pulls_its_batch_and_the_caller_never_holds_a_trajectory(ray_cluster, model_path, tmp_path):
    from actors.trajectory_queue import TrajectoryQueue

    cfg = _config(tmp_path)
    (trainer,) = create_trainer_group(cfg, model_path)
    queue = TrajectoryQueue.remote(cfg.queue, 1)
    admission = ray.get(queue.try_admit.remote("w0"))
    group = FinishedGroup("g0", "task-0", 0, _groups("g0"), ticket=admission.ticket, worker_id="w0")
    assert ray.get(queue.put.remote(group))

    report = ray.get(trainer.pull_batch.remote(queue, 1, 30.0, 1))
    assert not _holds_trajectories(report)  # what reaches the driver: ids, counts, a sample, a reference
    assert report["group_ids"] == ["g0"] and report["min_versions"] == [0] and report["tokens"] > 0
    assert report["version"] == 0  # rank 0's policy version at the pull: the step's lags are taken against it
    assert len(report["samples"]) == 1 and report["samples"][0]["group_id"] == "g0"
    assert len(report["refs"]) == 1 and isinstance(report["refs"][0], ray.ObjectRef)
    assert len(report["trajectories"]) == 3 and report["samples"][0]["prompt"]  # an outcome row each, one whole
    metrics = ray.get(trainer.train_pulled.remote(report["refs"]))
    assert metrics["train/stepped"] == 1.0 and metrics["rollout/trajectories"] == 3.0
    decisions = ray.get(trainer.last_decisions.remote())  # what the step did with each of them
    assert sorted(d["sample_index"] for d in decisions) == [0, 1, 2]
    assert any(d["outcome"] == "trained" for d in decisions)
    assert ray.get(trainer.pull_batch.remote(queue, 1, 0.2)) is None  # nothing left: the queue gave it once
    for actor in (trainer, queue):
        ray.kill(actor)


def test_a_step_makes_the_rewarded_turn_more_likely_in_the_policy_replica(ray_cluster, model_path, tmp_path):
    """The job's update path end to end (advantages, masks, loss, optimizer, weight push): after one step and
    a push, the replica that samples gives the one rewarded turn a higher log-prob and the group's unrewarded
    last turns a lower one. A sign error in the advantage or the loss, a mask on the wrong tokens or a push
    that never lands fails it; the rollout log-probs are the model's own, so no ratio starts clipped."""
    (trainer,) = create_trainer_group(_config(tmp_path, lr=1e-3), model_path)
    replica = Replica.remote(model_path)
    ray.get(trainer.attach_policy.remote(ActorReplicas([replica])))
    group = _groups("dir")  # sample 0's second turn is correct (reward 1.5); every other turn earns 0
    for t in group:
        scores = ray.get(replica.logprobs.remote(t.prompt_ids, t.response_ids))
        t.response_logprobs = [s if m else 0.0 for s, m in zip(scores, t.response_mask)]

    def last_turn(t: Trajectory, scores: list[float]) -> float:
        turn = t.turns[-1]
        return sum(scores[turn.start : turn.end])

    before = [last_turn(t, t.response_logprobs) for t in group]
    assert ray.get(trainer.train_step.remote(group))["train/stepped"] == 1.0
    ray.get(trainer.publish_weights.remote())
    after = [last_turn(t, ray.get(replica.logprobs.remote(t.prompt_ids, t.response_ids))) for t in group]
    assert after[0] > before[0], (before, after)
    assert after[1] < before[1] and after[2] < before[2], (before, after)
    for actor in (trainer, replica):
        ray.kill(actor)


def test_one_rank_mixed_precision_trains_pushes_and_resumes(ray_cluster, model_path, tmp_path):
    """trainer.compute_dtype=bfloat16 on one rank: FSDP2 over a one-rank gloo mesh with fp32 master weights; a step
    moves the weights, a push delivers them whole, a checkpoint restores them."""
    cfg = _config(tmp_path, compute_dtype="bfloat16")
    (trainer,) = create_trainer_group(cfg, model_path)
    assert ray.get(trainer.info.remote())["fsdp"]
    before = ray.get(trainer.checksum.remote())
    metrics = ray.get(trainer.train_step.remote(_groups("a")))
    assert metrics["train/stepped"] == 1.0 and metrics["train/grad_norm"] > 0
    after = ray.get(trainer.checksum.remote())
    assert after != before
    state = ray.get(trainer.state_dict_for_push.remote())
    assert {v.dtype for v in state.values() if v.is_floating_point()} == {torch.float32}  # policy.dtype, from fp32
    path = ray.get(trainer.save_checkpoint.remote(str(tmp_path / "mixed"), {}))
    resumed = TrainerActor.remote(cfg.model_dump(mode="json"), model_path)
    addr, port = ray.get(resumed.rendezvous_address.remote())
    ray.get(resumed.setup.remote(addr, port))
    ray.get(resumed.load_checkpoint.remote(path))
    assert ray.get(resumed.checksum.remote()) == after
    for actor in (trainer, resumed):
        ray.get(actor.shutdown.remote())
        ray.kill(actor)
