"""Fits the AVX-512 Gelu's table (vector_math_avx512.cc, kGeluMillsTable): on each interval
t in [k/2 - 1/4, k/2 + 1/4] (k = 0..29, t <= 14.5) a degree-5 polynomial in s = t - k/2 of
R(t) = Phi(-t)·e^(t²/2), least squares on 80 Chebyshev nodes weighted by 1/R (relative error),
coefficients rounded to float32 from the highest down, each lower one refitted after the higher
ones are rounded. Prints the table (rows: the coefficient of s^j; columns 30, 31 repeat 29) and
the worst error of a float32 Horner evaluation, in ulp of R, over 300 points per interval.

    .venv/bin/python benchmarks/cc/gelu_mills_fit.py    (mpmath comes with onnxruntime's sympy)
"""
import math

import mpmath as mp
import numpy as np

mp.mp.dps = 40
DEGREE, INTERVALS, NODES = 5, 30, 80


def mills(t):
    return mp.erfc(mp.mpf(t) / mp.sqrt(2)) / 2 * mp.exp(mp.mpf(t) ** 2 / 2)


def main():
    table = [[0.0] * 32 for _ in range(DEGREE + 1)]
    worst_all = 0.0
    for k in range(INTERVALS):
        c = k * 0.5
        lo, hi = max(0.0, c - 0.25), min(14.5, c + 0.25)
        nodes = np.cos(np.pi * (np.arange(NODES) + 0.5) / NODES) * (hi - lo) / 2 + (hi + lo) / 2
        s = nodes - c
        y = np.array([float(mills(t)) for t in nodes])
        fixed = {}
        for j in range(DEGREE, -1, -1):
            rest = y - sum(fc * s ** jj for jj, fc in fixed.items())
            a = np.vander(s, j + 1, increasing=True) / y[:, None]
            coef, *_ = np.linalg.lstsq(a, rest / y, rcond=None)
            fixed[j] = float(np.float32(coef[j]))
        for j in range(DEGREE + 1):
            table[j][k] = fixed[j]
        for t in np.linspace(lo, hi, 300):
            t32 = np.float32(t)
            sv = float(np.float32(t32 - np.float32(c)))
            p = np.float32(fixed[DEGREE])
            for j in range(DEGREE - 1, -1, -1):
                p = np.float32(float(p) * sv + fixed[j])  # one rounding, as an FMA
            exact = float(mills(float(t32)))
            worst_all = max(worst_all, abs(float(p) - exact) / 2.0 ** (math.frexp(exact)[1] - 24))
    for j in range(DEGREE + 1):
        table[j][30] = table[j][31] = table[j][29]
    print(f"// worst {worst_all:.2f} ulp of R")
    for j in range(DEGREE + 1):
        row = ", ".join(f"{v:.9e}f" for v in table[j])
        print(f"    {{{row}}},")


if __name__ == "__main__":
    main()
