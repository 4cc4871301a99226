// The mixed-radix complex FFT (fft.h). The plan, the Stockham pass structure and the radix 2 / 3 /
// 4 / 5 butterflies follow pocketfft's cfftp (Copyright (C) 2010-2018 Max-Planck-Society, Martin
// Reinecke; BSD-3-Clause, its notice in THIRD_PARTY_NOTICES.md), the FFT of numpy.fft and so of the ONNX
// reference; any other prime factor p takes a direct butterfly (a p-point DFT per output).
// Pass over factor `radix` with l1 transforms done and ido = length / (l1 * radix):
//   CH(i, k, u) = w^(u * l1 * i) * sum_m CC(i, m, k) e^(-+2 pi i m u / radix)
// with CC(a, b, c) = in[a + ido * (b + radix * c)], CH(a, b, c) = out[a + ido * (b + l1 * c)], the
// twiddle w = e^(2 pi i / length) conjugated for forward transforms.
#include "ops/fft.h"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace kiln {

namespace {

template <typename T>
using C = Complex<T>;

template <typename T>
inline C<T> operator+(C<T> a, C<T> b) { return {a.r + b.r, a.i + b.i}; }
template <typename T>
inline C<T> operator-(C<T> a, C<T> b) { return {a.r - b.r, a.i - b.i}; }
template <typename T>
inline C<T> operator*(C<T> a, T s) { return {a.r * s, a.i * s}; }

//! a = c + d, b = c - d
template <typename T>
inline void plusMinus(C<T>& a, C<T>& b, C<T> c, C<T> d) {
  a = c + d;
  b = c - d;
}
//! v * conj(w) for forward transforms, v * w for backward ones.
template <bool fwd, typename T>
inline C<T> twiddled(C<T> v, C<T> w) {
  return fwd ? C<T>{v.r * w.r + v.i * w.i, v.i * w.r - v.r * w.i} : C<T>{v.r * w.r - v.i * w.i, v.r * w.i + v.i * w.r};
}
//! a * (-i) for forward transforms, a * i for backward ones.
template <bool fwd, typename T>
inline void rotate90(C<T>& a) {
  const T t = fwd ? -a.r : a.r;
  a.r = fwd ? a.i : -a.i;
  a.i = t;
}

template <typename T>
struct Pass {
  size_t ido, l1, radix;
  const C<T>* cc;
  C<T>* ch;
  const C<T>* wa;
  const C<T>& CC(size_t a, size_t b, size_t c) const { return cc[a + ido * (b + radix * c)]; }
  C<T>& CH(size_t a, size_t b, size_t c) const { return ch[a + ido * (b + l1 * c)]; }
  C<T> WA(size_t x, size_t i) const { return wa[i - 1 + x * (ido - 1)]; }
};

template <bool fwd, typename T>
void pass2(const Pass<T>& p) {
  for (size_t k = 0; k < p.l1; ++k) {
    p.CH(0, k, 0) = p.CC(0, 0, k) + p.CC(0, 1, k);
    p.CH(0, k, 1) = p.CC(0, 0, k) - p.CC(0, 1, k);
    for (size_t i = 1; i < p.ido; ++i) {
      p.CH(i, k, 0) = p.CC(i, 0, k) + p.CC(i, 1, k);
      p.CH(i, k, 1) = twiddled<fwd>(p.CC(i, 0, k) - p.CC(i, 1, k), p.WA(0, i));
    }
  }
}

template <bool fwd, typename T>
void pass3(const Pass<T>& p) {
  const T tw1r = T(-0.5), tw1i = (fwd ? -1 : 1) * static_cast<T>(0.8660254037844386467637231707529362L);
  for (size_t k = 0; k < p.l1; ++k)
    for (size_t i = 0; i < p.ido; ++i) {
      const C<T> t0 = p.CC(i, 0, k);
      C<T> t1, t2;
      plusMinus(t1, t2, p.CC(i, 1, k), p.CC(i, 2, k));
      p.CH(i, k, 0) = t0 + t1;
      const C<T> ca = t0 + t1 * tw1r;
      const C<T> cb{-t2.i * tw1i, t2.r * tw1i};
      if (i == 0) {
        plusMinus(p.CH(0, k, 1), p.CH(0, k, 2), ca, cb);
      } else {
        p.CH(i, k, 1) = twiddled<fwd>(ca + cb, p.WA(0, i));
        p.CH(i, k, 2) = twiddled<fwd>(ca - cb, p.WA(1, i));
      }
    }
}

template <bool fwd, typename T>
void pass4(const Pass<T>& p) {
  for (size_t k = 0; k < p.l1; ++k)
    for (size_t i = 0; i < p.ido; ++i) {
      C<T> t1, t2, t3, t4;
      plusMinus(t2, t1, p.CC(i, 0, k), p.CC(i, 2, k));
      plusMinus(t3, t4, p.CC(i, 1, k), p.CC(i, 3, k));
      rotate90<fwd>(t4);
      if (i == 0) {
        plusMinus(p.CH(0, k, 0), p.CH(0, k, 2), t2, t3);
        plusMinus(p.CH(0, k, 1), p.CH(0, k, 3), t1, t4);
      } else {
        p.CH(i, k, 0) = t2 + t3;
        p.CH(i, k, 1) = twiddled<fwd>(t1 + t4, p.WA(0, i));
        p.CH(i, k, 2) = twiddled<fwd>(t2 - t3, p.WA(1, i));
        p.CH(i, k, 3) = twiddled<fwd>(t1 - t4, p.WA(2, i));
      }
    }
}

template <bool fwd, typename T>
void pass5(const Pass<T>& p) {
  const T tw1r = static_cast<T>(0.3090169943749474241022934171828191L),
          tw1i = (fwd ? -1 : 1) * static_cast<T>(0.9510565162951535721164393333793821L),
          tw2r = static_cast<T>(-0.8090169943749474241022934171828191L),
          tw2i = (fwd ? -1 : 1) * static_cast<T>(0.5877852522924731291687059546390728L);
  for (size_t k = 0; k < p.l1; ++k)
    for (size_t i = 0; i < p.ido; ++i) {
      const C<T> t0 = p.CC(i, 0, k);
      C<T> t1, t2, t3, t4;
      plusMinus(t1, t4, p.CC(i, 1, k), p.CC(i, 4, k));
      plusMinus(t2, t3, p.CC(i, 2, k), p.CC(i, 3, k));
      p.CH(i, k, 0) = C<T>{t0.r + t1.r + t2.r, t0.i + t1.i + t2.i};
      // outputs u1 and u2 = 5 - u1 (twbi carries its sign)
      auto step = [&](size_t u1, size_t u2, T twar, T twbr, T twai, T twbi) {
        const C<T> ca{t0.r + twar * t1.r + twbr * t2.r, t0.i + twar * t1.i + twbr * t2.i};
        const C<T> cb{-(twai * t4.i + twbi * t3.i), twai * t4.r + twbi * t3.r};
        if (i == 0) {
          plusMinus(p.CH(0, k, u1), p.CH(0, k, u2), ca, cb);
        } else {
          p.CH(i, k, u1) = twiddled<fwd>(ca + cb, p.WA(u1 - 1, i));
          p.CH(i, k, u2) = twiddled<fwd>(ca - cb, p.WA(u2 - 1, i));
        }
      };
      step(1, 4, tw1r, tw2r, tw1i, tw2i);
      step(2, 3, tw2r, tw1r, tw2i, -tw1i);
    }
}

//! Any radix: a direct `radix`-point DFT per output, `roots` the radix-th roots of unity.
template <bool fwd, typename T>
void passDirect(const Pass<T>& p, const C<T>* roots) {
  for (size_t k = 0; k < p.l1; ++k)
    for (size_t i = 0; i < p.ido; ++i)
      for (size_t u = 0; u < p.radix; ++u) {
        C<T> acc{T(0), T(0)};
        for (size_t m = 0; m < p.radix; ++m) acc = acc + twiddled<fwd>(p.CC(i, m, k), roots[(m * u) % p.radix]);
        p.CH(i, k, u) = (u == 0 || i == 0) ? acc : twiddled<fwd>(acc, p.WA(u - 1, i));
      }
}

//! e^(2 pi i m / n): computed in long double, rounded to double, then to T, as pocketfft rounds its
//! (accurate) double twiddles to float.
template <typename T>
C<T> unitRoot(int64_t m, int64_t n) {
  const long double a = 6.283185307179586476925286766559005768L * static_cast<long double>(m) / static_cast<long double>(n);
  return {static_cast<T>(static_cast<double>(std::cos(a))), static_cast<T>(static_cast<double>(std::sin(a)))};
}

}  // namespace

template <typename T>
ComplexFft<T>::ComplexFft(int64_t length) : length_(length) {
  if (length < 1) throw std::invalid_argument("ComplexFft: the length must be positive");
  // pocketfft's factor order: 4s, one 2 moved to the front, then odd factors ascending.
  std::vector<int64_t> radices;
  int64_t rest = length;
  while (rest % 4 == 0) radices.push_back(4), rest /= 4;
  if (rest % 2 == 0) {
    rest /= 2;
    radices.push_back(2);
    std::swap(radices.front(), radices.back());
  }
  for (int64_t d = 3; d * d <= rest; d += 2)
    while (rest % d == 0) radices.push_back(d), rest /= d;
  if (rest > 1) radices.push_back(rest);
  int64_t l1 = 1;
  for (int64_t ip : radices) {
    const int64_t ido = length / (l1 * ip);
    Factor f{ip, twiddles_.size(), roots_.size()};
    for (int64_t j = 1; j < ip; ++j)
      for (int64_t i = 1; i < ido; ++i) twiddles_.push_back(unitRoot<T>(j * l1 * i, length));
    if (ip > 5)
      for (int64_t q = 0; q < ip; ++q) roots_.push_back(unitRoot<T>(q, ip));
    factors_.push_back(f);
    l1 *= ip;
  }
}

template <typename T>
template <bool fwd>
void ComplexFft<T>::passes(Complex<T>* c, Complex<T>* scratch, T fct) const {
  const size_t n = static_cast<size_t>(length_);
  if (n == 1) {
    c[0] = c[0] * fct;
    return;
  }
  size_t l1 = 1;
  C<T>*p1 = c, *p2 = scratch;
  for (const Factor& f : factors_) {
    const size_t ip = static_cast<size_t>(f.radix), ido = n / (l1 * ip);
    const Pass<T> p{ido, l1, ip, p1, p2, twiddles_.data() + f.twiddles};
    switch (ip) {
      case 2: pass2<fwd>(p); break;
      case 3: pass3<fwd>(p); break;
      case 4: pass4<fwd>(p); break;
      case 5: pass5<fwd>(p); break;
      default: passDirect<fwd>(p, roots_.data() + f.roots);
    }
    std::swap(p1, p2);
    l1 *= ip;
  }
  if (p1 != c) {
    for (size_t i = 0; i < n; ++i) c[i] = fct != T(1) ? p1[i] * fct : p1[i];
  } else if (fct != T(1)) {
    for (size_t i = 0; i < n; ++i) c[i] = c[i] * fct;
  }
}

template <typename T>
void ComplexFft<T>::run(Complex<T>* data, Complex<T>* scratch, bool forward, T fct) const {
  if (forward) passes<true>(data, scratch, fct);
  else passes<false>(data, scratch, fct);
}

template class ComplexFft<float>;
template class ComplexFft<double>;

}  // namespace kiln
