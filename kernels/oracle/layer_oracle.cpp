// The layer stack of docs/design.md §1 in fp64 on the CPU. Only the stored inputs and weights
// are rounded (to the working dtype, by the shared generator); intermediates stay in double.
// Every product runs i-k-j over a transposed weight so the inner loop is a contiguous axpy
// that vectorises, and each output element sums its terms in a fixed order that depends on
// nothing but its own row: a row's result is bit-identical whatever the other rows hold,
// which the masking property tests rely on.
#include "oracle/layer_oracle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace tlb::oracle {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("oracle: " + what);
}

void check_shape(const LayerShape& s) {
  require(s.batch > 0 && s.seq > 0 && s.d_model > 0 && s.d_ff > 0 && s.heads > 0 && s.layers > 0,
          "batch, seq, d_model, d_ff, heads and layers must be positive");
  require(s.d_model % s.heads == 0, "heads must divide d_model");
  if (s.mask == MaskKind::padding) {
    require(static_cast<int64_t>(s.valid_lens.size()) == s.batch,
            "padding mask needs one valid length per batch element");
    for (int v : s.valid_lens) require(v >= 1 && v <= s.seq, "valid lengths must lie in 1..seq");
  }
}

// [rows, cols] -> [cols, rows], in tiles so neither side strides through memory.
std::vector<double> transpose(const std::vector<double>& w, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  std::vector<double> t(w.size());
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) t[c * rows + r] = w[r * cols + c];
    }
  return t;
}

size_t at(int64_t i) { return static_cast<size_t>(i); }

}  // namespace

int64_t tensor_elements(const LayerShape& s, TensorId t) {
  const int64_t d = s.d_model, f = s.d_ff;
  switch (t) {
    case TensorId::input: return s.batch * s.seq * d;
    case TensorId::ln1_gamma:
    case TensorId::ln1_beta:
    case TensorId::ln2_gamma:
    case TensorId::ln2_beta:
    case TensorId::b_out:
    case TensorId::b_ff2: return d;
    case TensorId::w_qkv: return 3 * d * d;
    case TensorId::b_qkv: return 3 * d;
    case TensorId::w_out: return d * d;
    case TensorId::w_ff1: return f * d;
    case TensorId::b_ff1: return f;
    case TensorId::w_ff2: return d * f;
  }
  throw std::invalid_argument("oracle: unknown tensor id");
}

std::vector<double> generate(const CaseSpec& c, DType dtype, uint32_t layer, TensorId t) {
  const LayerShape& s = c.shape;
  const TensorDist dist = tensor_dist(c.seed, static_cast<uint32_t>(c.id), layer, t, s.d_model, s.d_ff);
  const int64_t n = tensor_elements(s, t);
  std::vector<double> out(at(n));
  for (int64_t i = 0; i < n; ++i)
    out[at(i)] = static_cast<double>(sample_rounded(dist, static_cast<uint64_t>(i), dtype));
  return out;
}

LayerParams generate_layer(const CaseSpec& c, DType dtype, uint32_t layer) {
  LayerParams p;
  p.ln1_gamma = generate(c, dtype, layer, TensorId::ln1_gamma);
  p.ln1_beta = generate(c, dtype, layer, TensorId::ln1_beta);
  p.w_qkv = generate(c, dtype, layer, TensorId::w_qkv);
  p.b_qkv = generate(c, dtype, layer, TensorId::b_qkv);
  p.w_out = generate(c, dtype, layer, TensorId::w_out);
  p.b_out = generate(c, dtype, layer, TensorId::b_out);
  p.ln2_gamma = generate(c, dtype, layer, TensorId::ln2_gamma);
  p.ln2_beta = generate(c, dtype, layer, TensorId::ln2_beta);
  p.w_ff1 = generate(c, dtype, layer, TensorId::w_ff1);
  p.b_ff1 = generate(c, dtype, layer, TensorId::b_ff1);
  p.w_ff2 = generate(c, dtype, layer, TensorId::w_ff2);
  p.b_ff2 = generate(c, dtype, layer, TensorId::b_ff2);
  return p;
}

std::vector<double> generate_input(const CaseSpec& c, DType dtype) {
  return generate(c, dtype, 0, TensorId::input);
}

std::vector<double> linear(const std::vector<double>& x, int64_t rows, int64_t in,
                           const std::vector<double>& w, const std::vector<double>& b,
                           int64_t out) {
  require(static_cast<int64_t>(x.size()) == rows * in, "linear: input size");
  require(static_cast<int64_t>(w.size()) == out * in, "linear: weight size");
  require(b.empty() || static_cast<int64_t>(b.size()) == out, "linear: bias size");
  const std::vector<double> wt = transpose(w, out, in);  // [in, out]
  std::vector<double> y(at(rows * out));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < out; ++j) y[at(i * out + j)] = b.empty() ? 0.0 : b[at(j)];
  // Column blocks keep a slab of wt in cache across rows; k stays ascending for every
  // element, so blocking does not change any result.
  constexpr int64_t kColBlock = 512, kDepthBlock = 128;
  for (int64_t j0 = 0; j0 < out; j0 += kColBlock) {
    const int64_t j1 = std::min(out, j0 + kColBlock);
    for (int64_t k0 = 0; k0 < in; k0 += kDepthBlock) {
      const int64_t k1 = std::min(in, k0 + kDepthBlock);
      for (int64_t i = 0; i < rows; ++i) {
        double* yr = y.data() + i * out;
        const double* xr = x.data() + i * in;
        for (int64_t k = k0; k < k1; ++k) {
          const double a = xr[k];
          const double* wr = wt.data() + k * out;
          for (int64_t j = j0; j < j1; ++j) yr[j] += a * wr[j];
        }
      }
    }
  }
  return y;
}

std::vector<double> layer_norm(const std::vector<double>& x, int64_t rows, int64_t cols,
                               const std::vector<double>& gamma, const std::vector<double>& beta,
                               double eps) {
  require(static_cast<int64_t>(x.size()) == rows * cols, "layer_norm: input size");
  require(static_cast<int64_t>(gamma.size()) == cols && static_cast<int64_t>(beta.size()) == cols,
          "layer_norm: gamma/beta size");
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += xr[c];
    const double mean = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) sq += (xr[c] - mean) * (xr[c] - mean);
    const double var = sq / static_cast<double>(cols);  // biased, as PyTorch's LayerNorm
    const double inv_std = 1.0 / std::sqrt(var + eps);
    double* yr = y.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * inv_std * gamma[at(c)] + beta[at(c)];
  }
  return y;
}

std::vector<double> attention(const LayerShape& s, const std::vector<double>& q,
                              const std::vector<double>& k, const std::vector<double>& v) {
  check_shape(s);
  const int64_t seq = s.seq, d = s.d_model, dh = s.head_dim();
  const int64_t n = s.tokens() * d;
  require(static_cast<int64_t>(q.size()) == n && static_cast<int64_t>(k.size()) == n &&
              static_cast<int64_t>(v.size()) == n,
          "attention: q, k, v must be [batch, seq, d_model]");
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  std::vector<double> out(at(n));
  std::vector<double> kt(at(dh * seq)), vh(at(seq * dh)), scores(at(seq)), acc(at(dh));
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t base = b * seq * d;
    for (int64_t h = 0; h < s.heads; ++h) {
      // This head's keys transposed to [dh, seq] and values as [seq, dh], so both inner loops
      // below are contiguous.
      for (int64_t j = 0; j < seq; ++j)
        for (int64_t t = 0; t < dh; ++t) {
          kt[at(t * seq + j)] = k[at(base + j * d + h * dh + t)];
          vh[at(j * dh + t)] = v[at(base + j * d + h * dh + t)];
        }
      for (int64_t i = 0; i < seq; ++i) {
        // Keys this query sees: a prefix in every mask kind. Keys past it are never read.
        const int64_t visible = s.mask == MaskKind::causal    ? i + 1
                                : s.mask == MaskKind::padding ? s.valid_len(b)
                                                              : seq;
        const double* qi = q.data() + base + i * d + h * dh;
        std::fill(scores.begin(), scores.begin() + visible, 0.0);
        for (int64_t t = 0; t < dh; ++t) {
          const double qv = qi[t];
          const double* kr = kt.data() + t * seq;
          for (int64_t j = 0; j < visible; ++j) scores[at(j)] += qv * kr[j];
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          scores[at(j)] *= scale;
          mx = std::max(mx, scores[at(j)]);
        }
        double denom = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < visible; ++j) {
          const double p = std::exp(scores[at(j)] - mx);
          denom += p;
          const double* vr = vh.data() + j * dh;
          for (int64_t t = 0; t < dh; ++t) acc[at(t)] += p * vr[t];
        }
        double* oi = out.data() + base + i * d + h * dh;
        for (int64_t t = 0; t < dh; ++t) oi[t] = acc[at(t)] / denom;
      }
    }
  }
  return out;
}

double activate(Activation a, double x) {
  switch (a) {
    // 0.5 x (1 + erf(x / sqrt 2)), written with erfc so the negative tail keeps its relative
    // accuracy instead of cancelling in 1 + erf.
    case Activation::gelu: return 0.5 * x * std::erfc(-x * 0.70710678118654752440);
    case Activation::gelu_tanh: {
      // PyTorch's approximate="tanh", 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3),
      // as the identical x / (1 + exp(-2u)) for the same reason.
      const double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
      return x / (1.0 + std::exp(-2.0 * u));
    }
    case Activation::relu: return x > 0.0 ? x : 0.0;
  }
  throw std::invalid_argument("oracle: unknown activation");
}

std::vector<double> layer_forward(const LayerShape& s, const LayerParams& p,
                                  const std::vector<double>& x) {
  check_shape(s);
  const int64_t d = s.d_model, f = s.d_ff, rows = s.tokens();
  require(static_cast<int64_t>(x.size()) == rows * d, "layer_forward: x must be [batch, seq, d_model]");
  const double eps = static_cast<double>(s.eps);

  const std::vector<double> a = layer_norm(x, rows, d, p.ln1_gamma, p.ln1_beta, eps);
  const std::vector<double> qkv = linear(a, rows, d, p.w_qkv, p.b_qkv, 3 * d);  // [rows, 3d]
  std::vector<double> q(at(rows * d)), k(at(rows * d)), v(at(rows * d));
  for (int64_t r = 0; r < rows; ++r) {
    const double* src = qkv.data() + r * 3 * d;
    std::copy(src, src + d, q.begin() + r * d);
    std::copy(src + d, src + 2 * d, k.begin() + r * d);
    std::copy(src + 2 * d, src + 3 * d, v.begin() + r * d);
  }
  const std::vector<double> o = attention(s, q, k, v);
  std::vector<double> h1 = linear(o, rows, d, p.w_out, p.b_out, d);
  for (size_t i = 0; i < h1.size(); ++i) h1[i] += x[i];

  const std::vector<double> n2 = layer_norm(h1, rows, d, p.ln2_gamma, p.ln2_beta, eps);
  std::vector<double> up = linear(n2, rows, d, p.w_ff1, p.b_ff1, f);
  for (double& e : up) e = activate(s.activation, e);
  std::vector<double> y = linear(up, rows, f, p.w_ff2, p.b_ff2, d);
  for (size_t i = 0; i < y.size(); ++i) y[i] += h1[i];
  return y;
}

std::vector<double> stack_forward(const CaseSpec& c, DType dtype,
                                  std::vector<std::vector<double>>* per_layer) {
  check_shape(c.shape);
  std::vector<double> x = generate_input(c, dtype);
  if (per_layer) per_layer->clear();
  for (int64_t l = 0; l < c.shape.layers; ++l) {
    x = layer_forward(c.shape, generate_layer(c, dtype, static_cast<uint32_t>(l)), x);
    if (per_layer) per_layer->push_back(x);
  }
  return x;
}

}  // namespace tlb::oracle
