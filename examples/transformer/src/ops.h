// SPDX-License-Identifier: BSD-3-Clause
// The model's operations, forward and backward, as llm.c defines them: plain loops (OpenMP
// over rows) and BLAS for every matrix product. Each is a template over the element type so
// that the gradient checks run the very same code in double. Backward functions accumulate
// (+=) into parameter gradients and into the input gradient, as llm.c's do.
//
// Shapes: B batch, T sequence, C channels, OC output channels, NH heads, V vocabulary.
#pragma once

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace gpt::ops {

// Row-major C = alpha * op(A) op(B) + beta * C.
inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}
inline void gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                 int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}

// exp(x) for x <= 0, and tanh, written so that the element loops vectorise: libm's expf
// and tanhf are calls per element, and made GELU half of the step's time. exp: x = n ln2 + r
// with |r| <= ln2/2, e^r by its Taylor polynomial to r^6 (relative error below 2^-22), 2^n
// from the exponent bits. Double (the gradient checks) keeps the library functions.
inline float expNonPositive(float x) {
  x = x < -87.0f ? -87.0f : x;  // e^-87 is near fp32's smallest normal; below, 0 is as good
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;    // ln2 in two parts
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}
inline double expNonPositive(double x) { return std::exp(x); }

inline float tanhApprox(float x) {
  const float a = x < 0 ? -x : x;
  const float e = expNonPositive(-2.0f * a);
  const float t = (1.0f - e) / (1.0f + e);
  return x < 0 ? -t : t;
}
inline double tanhApprox(double x) { return std::tanh(x); }

// Row-major y = alpha * op(A) x + beta * y, A (m, n).
inline void gemv(bool ta, int m, int n, float alpha, const float* a, int lda, const float* x, float beta, float* y) {
  cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, m, n, alpha, a, lda, x, 1, beta, y, 1);
}
inline void gemv(bool ta, int m, int n, double alpha, const double* a, int lda, const double* x, double beta,
                 double* y) {
  cblas_dgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, m, n, alpha, a, lda, x, 1, beta, y, 1);
}

// Rows [row0, row0 + rows) of the (B*T, C) embeddings: out[i,:] = wte[tokens[row0+i],:] +
// wpe[(row0+i) % T,:]; tokens holds every row.
template <class T>
void encoderForward(T* out, const int* tokens, const T* wte, const T* wpe, int row0, int rows, int Tn, int C) {
#pragma omp parallel for
  for (int i = 0; i < rows; ++i) {
    const int bt = row0 + i;
    const T* e = wte + static_cast<size_t>(tokens[bt]) * C;
    const T* p = wpe + static_cast<size_t>(bt % Tn) * C;
    T* o = out + static_cast<size_t>(i) * C;
    for (int j = 0; j < C; ++j) o[j] = e[j] + p[j];
  }
}

// The gradient of the same rows. Serial: rows of wte are shared by many positions.
template <class T>
void encoderBackward(T* dwte, T* dwpe, const T* dout, const int* tokens, int row0, int rows, int Tn, int C) {
  for (int i = 0; i < rows; ++i) {
    const int bt = row0 + i;
    const T* d = dout + static_cast<size_t>(i) * C;
    T* e = dwte + static_cast<size_t>(tokens[bt]) * C;
    T* p = dwpe + static_cast<size_t>(bt % Tn) * C;
    for (int j = 0; j < C; ++j) {
      e[j] += d[j];
      p[j] += d[j];
    }
  }
}

constexpr double kLayerNormEps = 1e-5;

// out = (x - mean) * rstd * w + b per row of C; mean and rstd kept for the backward.
template <class T>
void layerNormForward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int rows, int C) {
#pragma omp parallel for
  for (int r = 0; r < rows; ++r) {
    const T* xr = x + static_cast<size_t>(r) * C;
    T m = 0;
    for (int i = 0; i < C; ++i) m += xr[i];
    m /= C;
    T v = 0;
    for (int i = 0; i < C; ++i) v += (xr[i] - m) * (xr[i] - m);
    v /= C;
    const T s = T(1) / std::sqrt(v + T(kLayerNormEps));
    T* o = out + static_cast<size_t>(r) * C;
    for (int i = 0; i < C; ++i) o[i] = (xr[i] - m) * s * w[i] + b[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

// dx += the gradient through LayerNorm; dw and db, sums over rows, come from per-thread
// partial sums added in thread order (deterministic for a given thread count).
template <class T>
void layerNormBackward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean, const T* rstd,
                       int rows, int C) {
  const int threads = omp_get_max_threads();
  std::vector<T> partial(static_cast<size_t>(threads) * 2 * C, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* pw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * C;
    T* pb = pw + C;
#pragma omp for
    for (int r = 0; r < rows; ++r) {
      const T* d = dout + static_cast<size_t>(r) * C;
      const T* xr = x + static_cast<size_t>(r) * C;
      T* dxr = dx + static_cast<size_t>(r) * C;
      const T m = mean[r], s = rstd[r];
      T dnormMean = 0, dnormNormMean = 0;
      for (int i = 0; i < C; ++i) {
        const T norm = (xr[i] - m) * s;
        const T dnorm = w[i] * d[i];
        dnormMean += dnorm;
        dnormNormMean += dnorm * norm;
      }
      dnormMean /= C;
      dnormNormMean /= C;
      for (int i = 0; i < C; ++i) {
        const T norm = (xr[i] - m) * s;
        const T dnorm = w[i] * d[i];
        pb[i] += d[i];
        pw[i] += norm * d[i];
        dxr[i] += (dnorm - dnormMean - norm * dnormNormMean) * s;
      }
    }
  }
  for (int t = 0; t < threads; ++t) {
    const T* pw = partial.data() + static_cast<size_t>(t) * 2 * C;
    for (int i = 0; i < C; ++i) {
      dw[i] += pw[i];
      db[i] += pw[C + i];
    }
  }
}

// out (rows, OC) = x (rows, C) W^T + bias; W is (OC, C); bias may be null.
template <class T>
void matmulForward(T* out, const T* x, const T* W, const T* bias, int rows, int C, int OC) {
  gemm(false, true, rows, OC, C, T(1), x, C, W, C, T(0), out, OC);
  if (!bias) return;
#pragma omp parallel for
  for (int r = 0; r < rows; ++r) {
    T* o = out + static_cast<size_t>(r) * OC;
    for (int j = 0; j < OC; ++j) o[j] += bias[j];
  }
}

// dbias += column sums of dout (rows, OC), as a product so that BLAS spreads it over the threads.
template <class T>
void biasBackward(T* dbias, const T* dout, int rows, int OC) {
  thread_local std::vector<T> ones;
  if (ones.size() < static_cast<size_t>(rows)) ones.assign(static_cast<size_t>(rows), T(1));
  gemv(true, rows, OC, T(1), dout, OC, ones.data(), T(1), dbias);
}

// dx = dout W (written, not accumulated), dW += dout^T x, dbias += column sums of dout
// (dbias may be null).
template <class T>
void matmulBackward(T* dx, T* dW, T* dbias, const T* dout, const T* x, const T* W, int rows, int C, int OC) {
  gemm(false, false, rows, C, OC, T(1), dout, OC, W, C, T(0), dx, C);
  gemm(true, false, OC, C, rows, T(1), dout, OC, x, C, T(1), dW, C);
  if (dbias) biasBackward(dbias, dout, rows, OC);
}

// Causal multi-head self-attention. qkv is (B, T, 3C): q, k, v of head h at channels
// [h*hs, (h+1)*hs) of their third. att (B, NH, T, T) keeps the softmax probabilities
// (zero above the diagonal) for the backward; out is (B, T, C). Rows go in blocks of
// kAttnRows: a block of rows needs the columns up to its last row only, so the products skip
// most of the masked upper triangle.
constexpr int kAttnRows = 64;

template <class T>
void attentionForward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH, int rowBegin = 0, int rowEnd = -1) {
  // Query rows [rowBegin, rowEnd) of every sequence (a token slice: earlier rows' keys and
  // values are in qkv already); all of them by default.
  if (rowEnd < 0) rowEnd = Tn;
  const int hs = C / NH, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(hs));
#pragma omp parallel for
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const T* q = qkv + static_cast<size_t>(b) * Tn * C3 + h * hs;
    const T* k = q + C;
    const T* v = q + 2 * C;
    T* a = att + static_cast<size_t>(bh) * Tn * Tn;
    T* o = out + static_cast<size_t>(b) * Tn * C + h * hs;
    for (int r0 = rowBegin; r0 < rowEnd; r0 += kAttnRows) {
      const int rows = std::min(kAttnRows, rowEnd - r0), cols = r0 + rows;
      T* ab = a + static_cast<size_t>(r0) * Tn;
      gemm(false, true, rows, cols, hs, scale, q + static_cast<size_t>(r0) * C3, C3, k, C3, T(0), ab, Tn);
      for (int t = r0; t < r0 + rows; ++t) {
        T* row = a + static_cast<size_t>(t) * Tn;
        T mx = row[0];
        for (int j = 1; j <= t; ++j) mx = row[j] > mx ? row[j] : mx;
        T sum = 0;
        for (int j = 0; j <= t; ++j) {
          row[j] = expNonPositive(row[j] - mx);
          sum += row[j];
        }
        const T inv = T(1) / sum;
        for (int j = 0; j <= t; ++j) row[j] *= inv;
        for (int j = t + 1; j < Tn; ++j) row[j] = 0;
      }
      gemm(false, false, rows, hs, cols, T(1), ab, Tn, v, C3, T(0), o + static_cast<size_t>(r0) * C, C);
    }
  }
}

// dqkv = the gradient through attention (every element of dqkv is written); scratch holds
// B*NH*T*T elements. With a query range [rowBegin, rowEnd) (a token slice, backward in
// reverse slice order) only those rows' dq is written and the keys' and values' gradients
// of rows [0, rowEnd) are added to dqkv's k and v parts, which the caller zeroes before the
// last slice.
template <class T>
void attentionBackward(T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, int B, int Tn, int C, int NH,
                       int rowBegin = 0, int rowEnd = -1) {
  const bool slice = rowEnd >= 0;
  if (!slice) rowEnd = Tn;
  const int hs = C / NH, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(hs));
#pragma omp parallel for
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const size_t qOff = static_cast<size_t>(b) * Tn * C3 + h * hs;
    const T* q = qkv + qOff;
    const T* k = q + C;
    const T* v = q + 2 * C;
    T* dq = dqkv + qOff;
    T* dk = dq + C;
    T* dv = dq + 2 * C;
    const T* a = att + static_cast<size_t>(bh) * Tn * Tn;
    const T* d = dout + static_cast<size_t>(b) * Tn * C + h * hs;
    T* da = scratch + static_cast<size_t>(bh) * Tn * Tn;
    // Blocks of the range from the last: going backwards, the last block of a whole
    // sequence spans every column and writes all of dk and dv, the earlier blocks add to
    // their first rows. A slice always adds.
    const int last = rowBegin + (rowEnd - 1 - rowBegin) / kAttnRows * kAttnRows;
    for (int r0 = last; r0 >= rowBegin; r0 -= kAttnRows) {
      const int rows = std::min(kAttnRows, rowEnd - r0), cols = r0 + rows;
      const T beta = r0 == last && !slice ? T(0) : T(1);
      const T* ab = a + static_cast<size_t>(r0) * Tn;
      T* db = da + static_cast<size_t>(r0) * Tn;
      const T* dr0 = d + static_cast<size_t>(r0) * C;
      gemm(false, true, rows, cols, hs, T(1), dr0, C, v, C3, T(0), db, Tn);   // d att = dout v^T
      gemm(true, false, cols, hs, rows, T(1), ab, Tn, dr0, C, beta, dv, C3);  // dv (+)= att^T dout
      // Softmax backward, in place: d pre-softmax = att * (datt - sum(att * datt)).
      for (int t = r0; t < r0 + rows; ++t) {
        const T* ar = a + static_cast<size_t>(t) * Tn;
        T* dr = da + static_cast<size_t>(t) * Tn;
        T dot = 0;
        for (int j = 0; j <= t; ++j) dot += ar[j] * dr[j];
        for (int j = 0; j <= t; ++j) dr[j] = ar[j] * (dr[j] - dot);
        for (int j = t + 1; j < cols; ++j) dr[j] = 0;
      }
      // dq = dS k * scale (these rows only), dk (+)= dS^T q * scale.
      gemm(false, false, rows, hs, cols, scale, db, Tn, k, C3, T(0), dq + static_cast<size_t>(r0) * C3, C3);
      gemm(true, false, cols, hs, rows, scale, db, Tn, q + static_cast<size_t>(r0) * C3, C3, beta, dk, C3);
    }
  }
}

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/pi)

template <class T>
void geluForward(T* out, const T* x, size_t n) {
#pragma omp parallel for
  for (size_t i = 0; i < n; ++i) {
    const T v = x[i];
    out[i] = T(0.5) * v * (T(1) + tanhApprox(T(kGeluScale) * (v + T(0.044715) * v * v * v)));
  }
}

// dx = the gradient through GELU (written, not accumulated).
template <class T>
void geluBackward(T* dx, const T* x, const T* dout, size_t n) {
#pragma omp parallel for
  for (size_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T arg = T(kGeluScale) * (v + T(0.044715) * v * v * v);
    const T th = tanhApprox(arg);
    const T sech2 = T(1) - th * th;
    const T local = T(0.5) * (T(1) + th) + v * T(0.5) * sech2 * T(kGeluScale) * (T(1) + T(3 * 0.044715) * v * v);
    dx[i] = local * dout[i];
  }
}

// out (rows, C) = (out + bias) + residual: a row-parallel projection's bias, added once after
// its sum, then the residual stream.
template <class T>
void biasResidualForward(T* out, const T* bias, const T* residual, int rows, int C) {
#pragma omp parallel for
  for (int r = 0; r < rows; ++r) {
    T* o = out + static_cast<size_t>(r) * C;
    const T* x = residual + static_cast<size_t>(r) * C;
    for (int j = 0; j < C; ++j) o[j] = (o[j] + bias[j]) + x[j];
  }
}

// Softmax over V logits per row, then -log p[target]; probs overwrite nothing (kept apart).
template <class T>
void softmaxCrossEntropyForward(T* losses, T* probs, const T* logits, const int* targets, int rows, int V) {
#pragma omp parallel for
  for (int r = 0; r < rows; ++r) {
    const T* l = logits + static_cast<size_t>(r) * V;
    T* p = probs + static_cast<size_t>(r) * V;
    T mx = l[0];
    for (int i = 1; i < V; ++i) mx = l[i] > mx ? l[i] : mx;
    T sum = 0;
    for (int i = 0; i < V; ++i) {
      p[i] = expNonPositive(l[i] - mx);
      sum += p[i];
    }
    const T inv = T(1) / sum;
    for (int i = 0; i < V; ++i) p[i] *= inv;
    losses[r] = -std::log(p[targets[r]]);
  }
}

// dlogits = (probs - onehot(target)) * dloss, with dloss the weight of each row's loss.
template <class T>
void softmaxCrossEntropyBackward(T* dlogits, const T* probs, const int* targets, T dloss, int rows, int V) {
#pragma omp parallel for
  for (int r = 0; r < rows; ++r) {
    const T* p = probs + static_cast<size_t>(r) * V;
    T* d = dlogits + static_cast<size_t>(r) * V;
    for (int i = 0; i < V; ++i) d[i] = (p[i] - (i == targets[r] ? T(1) : T(0))) * dloss;
  }
}

}  // namespace gpt::ops
