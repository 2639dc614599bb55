"""Row schema: the real dataset's shapes are accepted, broken rows are named by index and field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drkernel.types.task_row import RowError, TaskRow, parse_row, source_uuid

REFERENCE = "import torch\nclass Model(torch.nn.Module):\n    pass\n"


def recipe_like_row(**changes):
    """A row shaped like hkust-nlp/drkernel-rl-data, including columns we do not consume."""
    row = {
        "data_source": "cuda_llm",
        "prompt": [{"role": "user", "content": "optimize this"}],
        "ability": "kernel_optimization",
        "reward_model": {"ground_truth": REFERENCE, "style": "rule"},
        "extra_info": {
            "entry_point": "Model",
            "uuid": "abc-1",
            "level": 2,
            "ops": ["torch.relu"],
            "module_name": "m",
            "original_prompt": "old text",
            "repo_name": "someone/repo",
            "type": "pytorch",
        },
    }
    row.update(changes)
    return row


def test_recipe_row_round_trips_with_unknown_fields_kept():
    raw = recipe_like_row(split="train")
    row = parse_row(raw)
    assert row.reference_code == REFERENCE and row.entry_point == "Model" and row.task_uuid == "abc-1"
    record = row.to_record()
    assert record["split"] == "train"
    assert record["extra_info"]["repo_name"] == "someone/repo" and record["extra_info"]["type"] == "pytorch"
    assert parse_row(record) == row


def test_reward_model_as_json_string_and_ops_as_string():
    raw = recipe_like_row(reward_model=json.dumps({"ground_truth": REFERENCE, "style": "rule"}))
    raw["extra_info"]["ops"] = "torch.relu, torch.nn.Conv2d"
    row = parse_row(raw)
    assert row.reference_code == REFERENCE
    assert row.extra_info.ops == ["torch.relu", "torch.nn.Conv2d"]
    raw["extra_info"]["ops"] = '["torch.add"]'
    assert parse_row(raw).extra_info.ops == ["torch.add"]


def test_numpy_values_from_parquet_readers_are_normalized():
    raw = recipe_like_row(prompt=np.array([{"role": "user", "content": "x"}], dtype=object))
    raw["extra_info"]["ops"] = np.array(["torch.relu"], dtype=object)
    raw["extra_info"]["level"] = np.int64(1)
    row = parse_row(raw)
    assert row.extra_info.ops == ["torch.relu"] and row.extra_info.level == 1 and isinstance(row.extra_info.level, int)


def test_defaults_follow_the_recipe():
    """No entry_point -> Model; no uuid -> problem_id -> a hash of the source (never random)."""
    raw = recipe_like_row(extra_info={"problem_id": 17, "name": "x"})
    row = parse_row(raw)
    assert row.entry_point == "Model" and row.task_uuid == "17"
    row = parse_row(recipe_like_row(extra_info={}))
    assert row.task_uuid == source_uuid(REFERENCE) == parse_row(recipe_like_row(extra_info={})).task_uuid


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reward_model": {"style": "rule"}}, "reward_model.ground_truth"),
        ({"reward_model": "{not json"}, "reward_model"),
        ({"reward_model": {"ground_truth": ""}}, "reward_model.ground_truth"),
        ({"prompt": []}, "prompt"),
        ({"prompt": [{"role": "user"}]}, "prompt.0.content"),
        ({"prompt": [{"role": "robot", "content": "x"}]}, "prompt.0.role"),
        ({"prompt": [{"role": "assistant", "content": "x"}]}, "prompt"),
        ({"data_source": None}, "data_source"),
    ],
)
def test_bad_rows_name_index_and_field(change, field):
    with pytest.raises(RowError) as info:
        parse_row(recipe_like_row(**change), index=41)
    assert info.value.index == 41 and info.value.field == field
    assert str(info.value).startswith(f"row 41 (uuid abc-1): {field}: ")


def test_missing_column_and_non_mapping():
    raw = recipe_like_row()
    del raw["reward_model"]
    with pytest.raises(RowError, match=r"row 3 \(uuid abc-1\): reward_model: Field required"):
        parse_row(raw, 3)
    with pytest.raises(RowError, match="row 0: <row>: expected a mapping"):
        parse_row(["not", "a", "row"], 0)


def test_task_row_is_the_model_for_typed_access():
    row = TaskRow.model_validate(recipe_like_row())
    assert row.extra_info.level == 2 and row.prompt[0].role == "user"


def test_prompt_as_json_string_is_accepted_like_sft():
    """Exports store the chat list as a JSON string too; the RL path reads it as SFT does."""
    messages = [{"role": "system", "content": "be fast"}, {"role": "user", "content": "optimize this"}]
    row = parse_row(recipe_like_row(prompt=json.dumps(messages)))
    assert [m.model_dump() for m in row.prompt] == messages
    with pytest.raises(RowError, match=r"row 5 \(uuid abc-1\): prompt: .*not valid JSON"):
        parse_row(recipe_like_row(prompt="optimize this"), 5)


def test_errors_name_file_row_uuid_and_field():
    raw = recipe_like_row(reward_model={"ground_truth": ""})
    raw["extra_info"] = json.dumps(raw["extra_info"])  # the uuid is found in a JSON-string column too
    with pytest.raises(RowError) as info:
        parse_row(raw, 7, "pool/train-1.parquet")
    error = info.value
    assert (error.file, error.index, error.uuid, error.field) == (
        "pool/train-1.parquet",
        7,
        "abc-1",
        "reward_model.ground_truth",
    )
    assert str(error).startswith("pool/train-1.parquet: row 7 (uuid abc-1): reward_model.ground_truth: ")
