# A stand-in for the `lerobot` package in mact's tests (tests/serve/test_lerobot.py): only the dataclasses LeRobot's
# async-inference payloads pickle, with LeRobot's module path, class names and fields
# (src/lerobot/async_inference/helpers.py), so Python's own pickle makes the bytes a real robot client sends.
