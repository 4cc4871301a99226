// A complex FFT of any length in the element type's precision (float or double): DFT and STFT's
// transform (ops/dft.cpp). Mixed radix (Cooley-Tukey, Stockham passes): the radix 2, 3, 4 and 5
// butterflies follow pocketfft's cfftp (the FFT NumPy and the ONNX reference use) operation for
// operation, so float32 transforms round as numpy.fft does on complex64; any other prime factor
// takes a direct butterfly (O(p) per output). fft.cpp is compiled without fused multiply-adds
// (CMakeLists.txt: -ffp-contract=off -mno-fma), which would round differently.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln {

template <typename T>
struct Complex {
  T r, i;
};

template <typename T>
class ComplexFft {
 public:
  //! A plan for transforms of `length` >= 1 points (twiddles computed here, in double).
  explicit ComplexFft(int64_t length);
  int64_t length() const { return length_; }
  //! Transforms data[0..length) in place: X[k] = fct * sum_j x[j] e^{-+2 pi i j k / length}
  //! (forward: minus). `scratch` holds `length` values.
  void run(Complex<T>* data, Complex<T>* scratch, bool forward, T fct) const;

 private:
  struct Factor {
    int64_t radix;
    size_t twiddles;  // offset of its (radix - 1) * (ido - 1) twiddles in twiddles_
    size_t roots;     // offset of its radix roots of unity in roots_ (direct butterflies only)
  };
  template <bool forward>
  void passes(Complex<T>* data, Complex<T>* scratch, T fct) const;

  int64_t length_;
  std::vector<Factor> factors_;
  std::vector<Complex<T>> twiddles_, roots_;
};

extern template class ComplexFft<float>;
extern template class ComplexFft<double>;

}  // namespace kiln
