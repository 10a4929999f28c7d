"""Saved trajectories of runs with contacts: :func:`gaussopt.load` takes what
:meth:`Trajectory.save` writes for them (times that repeat at contact transitions) and
refuses a file whose contact forces are missing or not finite, or whose times repeat
where no impact or transition happened (:class:`gaussopt.core.exceptions.TrajectoryFileError`
naming the field)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.exceptions import TrajectoryFileError
from problems import sliding_block


@pytest.fixture(scope="module")
def block():
    """The pushed block on the rough incline over 2 s: it sticks, slides up, sticks and
    slides down (three stick/slip transitions, each a time that repeats)."""
    pb = sliding_block.build(t_end=2.0)
    tr = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **pb.settings)
    assert tr.success, tr.message
    return tr


def _entries(path):
    with np.load(path, allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    return json.loads(str(out.pop("__header__"))), out


def _write(path, header, arrays):
    np.savez_compressed(path, __header__=np.array(json.dumps(header)), **arrays)
    return path


def test_contact_run_round_trip(block, tmp_path):
    repeats = block.t[1:][np.diff(block.t) == 0]
    transitions = {float(r[0]) for r in block.meta["contact_transitions"]}
    assert repeats.size >= 3 and set(repeats.tolist()) <= transitions
    back = go.load(block.save(tmp_path / "block"))
    np.testing.assert_array_equal(back.t, block.t)
    np.testing.assert_array_equal(back.q, block.q)
    np.testing.assert_array_equal(back.contact_forces, block.contact_forces)
    np.testing.assert_array_equal(back.friction_forces, block.friction_forces)
    assert back.meta["contact_points"] == block.meta["contact_points"]


@pytest.mark.parametrize("key", ["contact_forces", "friction_forces"])
def test_missing_contact_forces_refused(block, tmp_path, key):
    header, arrays = _entries(block.save(tmp_path / "block"))
    del arrays[key]
    path = _write(tmp_path / "cut.npz", header, arrays)
    with pytest.raises(TrajectoryFileError, match=rf"missing array `{key}`.*contact_points") as e:
        go.load(path)
    assert e.value.field == key


@pytest.mark.parametrize("key", ["contact_forces", "friction_forces"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_contact_forces_refused(block, tmp_path, key, bad):
    header, arrays = _entries(block.save(tmp_path / "block"))
    arrays[key] = arrays[key].copy()
    arrays[key][5, 0] = bad
    path = _write(tmp_path / "nan.npz", header, arrays)
    with pytest.raises(TrajectoryFileError, match=rf"array `{key}` has NaN or inf \(row 5\)") as e:
        go.load(path)
    assert e.value.field == key


def test_contact_forces_of_wrong_width_refused(block, tmp_path):
    header, arrays = _entries(block.save(tmp_path / "block"))
    arrays["contact_forces"] = np.hstack([arrays["contact_forces"]] * 2)
    path = _write(tmp_path / "wide.npz", header, arrays)
    with pytest.raises(TrajectoryFileError, match=r"`contact_forces` has shape .* 1 contact point"):
        go.load(path)


def test_repeated_time_only_at_a_recorded_transition(block, tmp_path):
    header, arrays = _entries(block.save(tmp_path / "block"))
    # (a) a transition left out of the meta: its repeated time is refused
    rows = header["meta"]["contact_transitions"]
    t_rep = float(block.t[1:][np.diff(block.t) == 0][-1])
    header_a = json.loads(json.dumps(header))
    header_a["meta"]["contact_transitions"] = [r for r in rows if float(r[0]) != t_rep]
    with pytest.raises(TrajectoryFileError, match=r"a time repeats only at a recorded impact "
                                                  r"or contact transition") as e:
        go.load(_write(tmp_path / "a.npz", header_a, arrays))
    assert e.value.field == "t"
    # (b) a repeat where nothing happened (a sample duplicated in every array)
    i = int(np.flatnonzero(np.diff(block.t) > 0)[3])
    assert float(block.t[i]) not in {float(r[0]) for r in rows}
    dup = {k: (np.insert(x, i, x[i], axis=0) if x.ndim and x.shape[0] == block.t.size else x)
           for k, x in arrays.items()}
    with pytest.raises(TrajectoryFileError, match=r"t\[\d+\] = t\[\d+\]"):
        go.load(_write(tmp_path / "b.npz", header, dup))


def test_malformed_contact_meta_refused(block, tmp_path):
    header, arrays = _entries(block.save(tmp_path / "block"))
    header["meta"]["contact_transitions"] = [["soon", "plane[0]", "stick"]]
    with pytest.raises(TrajectoryFileError, match=r"meta.contact_transitions"):
        go.load(_write(tmp_path / "m.npz", header, arrays))


@pytest.mark.parametrize("entry", ["contact_forces.npy", "t.npy", "__header__.npy"])
def test_flipped_bytes_refused(block, tmp_path, entry):
    """Bytes flipped inside an entry's compressed data (zip's own metadata, such as an
    entry's time stamp, is not checked by anyone: the data are)."""
    import struct
    import zipfile

    path = block.save(tmp_path / "block")
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(entry)
    data = bytearray(path.read_bytes())
    # the local header: 30 bytes, then the name and the extra field, then the data
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len
    assert info.compress_size > 8
    for k in range(start + info.compress_size // 2 - 4, start + info.compress_size // 2 + 4):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(TrajectoryFileError, match="damaged|not a gaussopt"):
        go.load(path)


def test_smooth_run_with_repeated_time_still_refused(tmp_path):
    sysm = go.System(("x",), mass=np.eye(1), force=[0.0], name="free")
    tr = go.simulate(sysm, (0.0, 1.0), [0.0], [1.0], t_eval=[0.0, 0.5, 1.0])
    header, arrays = _entries(tr.save(tmp_path / "free"))
    arrays = {k: (np.insert(x, 1, x[1], axis=0) if x.ndim and x.shape[0] == 3 else x)
              for k, x in arrays.items()}
    with pytest.raises(TrajectoryFileError, match=r"t\[2\] = t\[1\] = 0\.5") as e:
        go.load(_write(tmp_path / "rep.npz", header, arrays))
    assert e.value.field == "t"
