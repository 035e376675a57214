"""The inputs and numpy reference of rotary.test: `inputs DIR` writes them,
`check DIR` compares mp-run's outputs of Inputs/rotary.mlir with numpy's
float32 arithmetic, which rounds each product and sum as mp.rotary must:
bitwise, and NaN where numpy's is (x holds NaNs of both signs)."""
import os
import sys

import numpy as np


def rotate(x, cos, sin, dim, interleaved):
    """x * cos + rotate(x) * sin on the first `dim` channels, in float32."""
    xr, rest = x[..., :dim], x[..., dim:]
    if interleaved:
        a, b = xr[..., 0::2], xr[..., 1::2]
        turned = np.stack((-b, a), axis=-1).reshape(xr.shape)
    else:
        half = dim // 2
        turned = np.concatenate((-xr[..., half:], xr[..., :half]), axis=-1)
    return np.concatenate((xr * cos + turned * sin, rest), axis=-1)


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "inputs":
        rng = np.random.default_rng(5)
        shapes = [(3, 5, 37, 64), (37, 64), (37, 64), (3, 1, 37, 32), (3, 1, 37, 32)]
        for i, shape in enumerate(shapes):
            values = rng.standard_normal(shape).astype(np.float32)
            if i == 0:  # NaNs of both signs, which must stay NaNs
                values[0, 0, 0, 1] = np.nan
                values[1, 2, 3, 6] = -np.nan
                values[1, 0, 2, 2] = np.nan
            np.save(os.path.join(d, "in%d.npy" % i), values)
        return 0
    x, cos, sin, cp, sp = (np.load(os.path.join(d, "in%d.npy" % i)) for i in range(5))
    expected = [rotate(x, cos, sin, 64, False), rotate(x, cos, sin, 64, True),
                rotate(x, cp, sp, 32, False), rotate(x, cp, sp, 32, True),
                rotate(x + x, cp, sp, 32, False)]
    failed = 0
    for i, want in enumerate(expected):
        got = np.load(os.path.join(d, "out", "output%d.npy" % i))
        # (A NaN's sign is not IEEE's to keep: a compiler may make
        # a + (-b) * s a subtraction.)
        differ = ((got.view(np.uint32) != want.view(np.uint32)) &
                  ~(np.isnan(got) & np.isnan(want)))
        same = got.shape == want.shape and not differ.any()
        print("output%d: %s" % (i, "bitwise numpy's" if same else
                                "DIFFERS in %d words" % np.sum(differ)))
        failed += not same
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
