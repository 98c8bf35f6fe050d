"""Rolling release on recorded (time, ready endpoints) changes: time below the floor, and where it was."""

from harness.criteria.inference.rolling_release import below_note, seconds_below


def test_time_below_the_floor_is_summed_up_to_the_end_and_named_where_it_was() -> None:
    points = [(100.0, 3), (101.0, 4), (101.5, 2), (102.5, 3), (103.0, 2)]
    assert seconds_below(points, 3, 103.25) == 1.25
    assert below_note(points, 3, 100.0) == "; below the floor: 2 at +1.50 s, 2 at +3.00 s"


def test_a_rollout_that_never_dips_says_nothing() -> None:
    points = [(0.0, 3), (1.0, 4), (2.0, 3)]
    assert seconds_below(points, 3, 5.0) == 0.0 and below_note(points, 3, 0.0) == ""
