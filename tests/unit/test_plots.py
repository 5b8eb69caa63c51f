"""The per-trial metric plot's pieces: a PBT exploit continues a trial from an earlier iteration."""

from raytrain.tune.plots import _pieces


def test_a_trial_that_goes_on_from_an_earlier_iteration_is_drawn_in_pieces():
    pts = [(1, 10.0), (2, 11.0), (3, 12.0), (4, 13.0), (3, 20.0), (4, 21.0), (5, 22.0)]
    assert _pieces(pts) == [[(1, 10.0), (2, 11.0), (3, 12.0), (4, 13.0)], [(3, 20.0), (4, 21.0), (5, 22.0)]]


def test_a_repeated_iteration_starts_a_piece_and_no_points_make_none():
    assert _pieces([(1, 1.0), (1, 2.0)]) == [[(1, 1.0)], [(1, 2.0)]]
    assert _pieces([]) == []
