// The fp64 oracle checked by properties that follow from the math alone (masks, softmax,
// LayerNorm statistics, layer composition, activation closed forms) and against a naive
// element-by-element evaluation of docs/design.md §1 written independently here.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "oracle/layer_oracle.hpp"

namespace {

using tlb::Activation;
using tlb::DType;
using tlb::LayerShape;
using tlb::MaskKind;
namespace oracle = tlb::oracle;

tlb::CaseSpec make_case(int64_t batch, int64_t seq, int64_t d, int64_t heads, int64_t d_ff,
                        int64_t layers, MaskKind mask, std::vector<int> valid_lens = {},
                        Activation act = Activation::gelu) {
  tlb::CaseSpec c;
  c.id = 77;
  c.name = "oracle-test";
  c.seed = 12345;
  LayerShape& s = c.shape;
  s.batch = batch;
  s.seq = seq;
  s.d_model = d;
  s.heads = heads;
  s.d_ff = d_ff;
  s.layers = layers;
  s.mask = mask;
  s.valid_lens = std::move(valid_lens);
  s.activation = act;
  return c;
}

std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

// The stack over a caller-given input, with the case's generated weights.
std::vector<double> run_stack(const tlb::CaseSpec& c, DType dt, std::vector<double> x) {
  for (int64_t l = 0; l < c.shape.layers; ++l)
    x = oracle::layer_forward(c.shape, oracle::generate_layer(c, dt, static_cast<uint32_t>(l)), x);
  return x;
}

bool rows_equal(const std::vector<double>& a, const std::vector<double>& b, int64_t row,
                int64_t d) {
  for (int64_t j = 0; j < d; ++j)
    if (a[static_cast<size_t>(row * d + j)] != b[static_cast<size_t>(row * d + j)]) return false;
  return true;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::fabs(x));
  return m;
}

// The layer of docs/design.md §1 evaluated element by element, without the oracle's pieces:
// explicit sums over the [out, in] weights, per-head index arithmetic into the packed q/k/v
// rows, a full score matrix with -inf where masked.
std::vector<double> naive_layer(const LayerShape& s, const oracle::LayerParams& p,
                                const std::vector<double>& x) {
  const int64_t B = s.batch, S = s.seq, D = s.d_model, H = s.heads, Dh = D / H, F = s.d_ff;
  const double eps = s.eps;
  auto ln = [&](const std::vector<double>& in, const std::vector<double>& g,
                const std::vector<double>& b) {
    std::vector<double> out(in.size());
    for (int64_t r = 0; r < B * S; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < D; ++j) mean += in[r * D + j] / static_cast<double>(D);
      for (int64_t j = 0; j < D; ++j) var += std::pow(in[r * D + j] - mean, 2) / static_cast<double>(D);
      for (int64_t j = 0; j < D; ++j)
        out[r * D + j] = g[j] * (in[r * D + j] - mean) / std::sqrt(var + eps) + b[j];
    }
    return out;
  };
  const std::vector<double> a = ln(x, p.ln1_gamma, p.ln1_beta);
  // proj(r, which, h, t): row `which * D + h * Dh + t` of the packed weight applied to token r.
  auto proj = [&](int64_t r, int64_t which, int64_t h, int64_t t) {
    const int64_t out_row = which * D + h * Dh + t;
    double acc = p.b_qkv[out_row];
    for (int64_t k = 0; k < D; ++k) acc += a[r * D + k] * p.w_qkv[out_row * D + k];
    return acc;
  };
  std::vector<double> q(B * S * D), k(B * S * D), v(B * S * D);
  for (int64_t r = 0; r < B * S; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < Dh; ++t) {
        q[r * D + h * Dh + t] = proj(r, 0, h, t);
        k[r * D + h * Dh + t] = proj(r, 1, h, t);
        v[r * D + h * Dh + t] = proj(r, 2, h, t);
      }
  std::vector<double> o(B * S * D);
  std::vector<double> score(S * S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j) {
          bool masked = (s.mask == MaskKind::causal && j > i) ||
                        (s.mask == MaskKind::padding && j >= s.valid_lens[b]);
          double dot = 0;
          for (int64_t t = 0; t < Dh; ++t)
            dot += q[(b * S + i) * D + h * Dh + t] * k[(b * S + j) * D + h * Dh + t];
          score[i * S + j] = masked ? -INFINITY : dot / std::sqrt(static_cast<double>(Dh));
        }
      for (int64_t i = 0; i < S; ++i) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < S; ++j) mx = std::max(mx, score[i * S + j]);
        for (int64_t j = 0; j < S; ++j) sum += std::exp(score[i * S + j] - mx);
        for (int64_t t = 0; t < Dh; ++t) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j)
            acc += std::exp(score[i * S + j] - mx) / sum * v[(b * S + j) * D + h * Dh + t];
          o[(b * S + i) * D + h * Dh + t] = acc;
        }
      }
    }
  std::vector<double> h1(B * S * D);
  for (int64_t r = 0; r < B * S; ++r)
    for (int64_t n = 0; n < D; ++n) {
      double acc = p.b_out[n];
      for (int64_t kk = 0; kk < D; ++kk) acc += o[r * D + kk] * p.w_out[n * D + kk];
      h1[r * D + n] = x[r * D + n] + acc;
    }
  const std::vector<double> n2 = ln(h1, p.ln2_gamma, p.ln2_beta);
  std::vector<double> y(B * S * D);
  std::vector<double> up(F);
  for (int64_t r = 0; r < B * S; ++r) {
    for (int64_t f = 0; f < F; ++f) {
      double acc = p.b_ff1[f];
      for (int64_t kk = 0; kk < D; ++kk) acc += n2[r * D + kk] * p.w_ff1[f * D + kk];
      if (s.activation == Activation::gelu)
        up[f] = 0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0)));
      else if (s.activation == Activation::gelu_tanh)
        up[f] = 0.5 * acc *
                (1 + std::tanh(std::sqrt(2 / M_PI) * (acc + 0.044715 * std::pow(acc, 3))));
      else
        up[f] = std::max(acc, 0.0);
    }
    for (int64_t n = 0; n < D; ++n) {
      double acc = p.b_ff2[n];
      for (int64_t f = 0; f < F; ++f) acc += up[f] * p.w_ff2[n * F + f];
      y[r * D + n] = h1[r * D + n] + acc;
    }
  }
  return y;
}

}  // namespace

TEST_CASE("oracle layer matches a naive evaluation of the spec for every mask, activation and "
          "dtype",
          "[oracle]") {
  const struct {
    MaskKind mask;
    std::vector<int> valid;
    Activation act;
  } variants[] = {
      {MaskKind::none, {}, Activation::gelu},
      {MaskKind::causal, {}, Activation::gelu_tanh},
      {MaskKind::padding, {7, 3, 1}, Activation::relu},
      {MaskKind::padding, {1, 7, 5}, Activation::gelu},
      {MaskKind::causal, {}, Activation::relu},
  };
  for (const auto& var : variants)
    for (DType dt : {DType::fp16, DType::bf16, DType::fp32}) {
      // d_model 24 with 3 heads (dh 8) and d_ff 40: nothing is a power of two.
      const tlb::CaseSpec c = make_case(3, 7, 24, 3, 40, 1, var.mask, var.valid, var.act);
      const std::vector<double> x = oracle::generate_input(c, dt);
      const oracle::LayerParams p = oracle::generate_layer(c, dt, 0);
      const std::vector<double> got = oracle::layer_forward(c.shape, p, x);
      const std::vector<double> want = naive_layer(c.shape, p, x);
      INFO("mask " << tlb::to_string(var.mask) << " activation " << tlb::to_string(var.act)
                   << " dtype " << tlb::to_string(dt));
      REQUIRE(got.size() == want.size());
      CHECK(max_abs_diff(got, want) < 1e-12 * max_abs(want));
      CHECK(got == oracle::stack_forward(c, dt));
    }
}

TEST_CASE("with one token, attention returns v for every head and mask", "[oracle]") {
  for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::padding}) {
    tlb::CaseSpec c = make_case(3, 1, 32, 4, 64, 1, mask,
                                mask == MaskKind::padding ? std::vector<int>{1, 1, 1}
                                                          : std::vector<int>{});
    const size_t n = 3 * 32;
    const std::vector<double> q = random_vector(n, 1, 5.0), k = random_vector(n, 2, 5.0),
                              v = random_vector(n, 3);
    CHECK(oracle::attention(c.shape, q, k, v) == v);

    // The whole layer then reduces to x + (LN1(x) Wv^T + bv) Wo^T + bo followed by the FFN.
    const LayerShape& s = c.shape;
    const oracle::LayerParams p = oracle::generate_layer(c, DType::fp32, 0);
    const std::vector<double> x = oracle::generate_input(c, DType::fp32);
    const std::vector<double> a = oracle::layer_norm(x, 3, 32, p.ln1_gamma, p.ln1_beta, s.eps);
    const std::vector<double> wv(p.w_qkv.begin() + 2 * 32 * 32, p.w_qkv.end());
    const std::vector<double> bv(p.b_qkv.begin() + 2 * 32, p.b_qkv.end());
    std::vector<double> h1 = oracle::linear(oracle::linear(a, 3, 32, wv, bv, 32), 3, 32, p.w_out,
                                            p.b_out, 32);
    for (size_t i = 0; i < n; ++i) h1[i] += x[i];
    std::vector<double> up = oracle::linear(
        oracle::layer_norm(h1, 3, 32, p.ln2_gamma, p.ln2_beta, s.eps), 3, 32, p.w_ff1, p.b_ff1, 64);
    for (double& e : up) e = oracle::activate(s.activation, e);
    std::vector<double> y = oracle::linear(up, 3, 64, p.w_ff2, p.b_ff2, 32);
    for (size_t i = 0; i < n; ++i) y[i] += h1[i];
    CHECK(max_abs_diff(oracle::layer_forward(s, p, x), y) < 1e-13);
  }
}

TEST_CASE("softmax weights sum to one: all-ones values give all-ones output", "[oracle]") {
  for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::padding}) {
    const tlb::CaseSpec c = make_case(2, 13, 48, 6, 96, 1, mask,
                                      mask == MaskKind::padding ? std::vector<int>{13, 4}
                                                                : std::vector<int>{});
    const size_t n = 2 * 13 * 48;
    // Large logits (|score| up to ~50) stress the max subtraction.
    const std::vector<double> q = random_vector(n, 10, 4.0), k = random_vector(n, 11, 4.0);
    const std::vector<double> out = oracle::attention(c.shape, q, k, std::vector<double>(n, 1.0));
    for (double o : out) REQUIRE(std::fabs(o - 1.0) < 1e-14);
  }
}

TEST_CASE("zero queries average exactly the visible values: the mask extents", "[oracle]") {
  // With q = 0 every visible key gets the same weight, so row i is the mean of the values the
  // mask lets it see: all rows (none), rows 0..i (causal), rows below valid_len (padding).
  const int64_t B = 2, S = 9, D = 16, H = 2;
  for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::padding}) {
    const std::vector<int> valid = {4, 9};
    const tlb::CaseSpec c = make_case(B, S, D, H, 32, 1, mask,
                                      mask == MaskKind::padding ? valid : std::vector<int>{});
    const size_t n = static_cast<size_t>(B * S * D);
    const std::vector<double> k = random_vector(n, 20, 3.0), v = random_vector(n, 21);
    const std::vector<double> out = oracle::attention(c.shape, std::vector<double>(n, 0.0), k, v);
    double worst = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t visible = mask == MaskKind::causal    ? i + 1
                                : mask == MaskKind::padding ? valid[b]
                                                            : S;
        for (int64_t j = 0; j < D; ++j) {
          double mean = 0;
          for (int64_t r = 0; r < visible; ++r) mean += v[(b * S + r) * D + j];
          mean /= static_cast<double>(visible);
          worst = std::max(worst, std::fabs(out[(b * S + i) * D + j] - mean));
        }
      }
    INFO("mask " << tlb::to_string(mask));
    CHECK(worst < 1e-14);
  }
}

TEST_CASE("causal mask: changing later tokens leaves earlier outputs bit-identical", "[oracle]") {
  const tlb::CaseSpec c = make_case(2, 9, 32, 4, 64, 2, MaskKind::causal);
  const int64_t S = 9, D = 32;
  const std::vector<double> x = oracle::generate_input(c, DType::fp32);
  const std::vector<double> base = run_stack(c, DType::fp32, x);
  const std::vector<double> noise = random_vector(x.size(), 99);
  for (int64_t i = 0; i < S - 1; ++i) {
    std::vector<double> xp = x;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t r = i + 1; r < S; ++r)
        for (int64_t j = 0; j < D; ++j) xp[(b * S + r) * D + j] += noise[(b * S + r) * D + j];
    const std::vector<double> out = run_stack(c, DType::fp32, xp);
    INFO("tokens after " << i << " perturbed");
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t r = 0; r <= i; ++r) CHECK(rows_equal(base, out, b * S + r, D));
      CHECK_FALSE(rows_equal(base, out, b * S + i + 1, D));  // the perturbation is visible
    }
  }
  // The last query sees every key, so in one layer it matches the unmasked layer exactly.
  const tlb::CaseSpec one = make_case(2, 9, 32, 4, 64, 1, MaskKind::causal);
  const tlb::CaseSpec open = make_case(2, 9, 32, 4, 64, 1, MaskKind::none);
  const std::vector<double> yc = oracle::stack_forward(one, DType::fp32);
  const std::vector<double> yn = oracle::stack_forward(open, DType::fp32);
  for (int64_t b = 0; b < 2; ++b) {
    CHECK(rows_equal(yc, yn, b * S + S - 1, D));
    CHECK_FALSE(rows_equal(yc, yn, b * S, D));
  }
}

TEST_CASE("padding mask: changing padded tokens leaves valid rows bit-identical", "[oracle]") {
  const std::vector<int> valid = {5, 9, 1};
  const int64_t B = 3, S = 9, D = 32;
  const tlb::CaseSpec c = make_case(B, S, D, 4, 64, 2, MaskKind::padding, valid);
  const std::vector<double> x = oracle::generate_input(c, DType::bf16);
  const std::vector<double> base = run_stack(c, DType::bf16, x);
  std::vector<double> xp = x;
  const std::vector<double> noise = random_vector(x.size(), 5, 3.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = valid[b]; r < S; ++r)
      for (int64_t j = 0; j < D; ++j) xp[(b * S + r) * D + j] += noise[(b * S + r) * D + j];
  const std::vector<double> out = run_stack(c, DType::bf16, xp);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < S; ++r) {
      INFO("batch " << b << " row " << r);
      if (r < valid[b])
        CHECK(rows_equal(base, out, b * S + r, D));
      else  // padded query rows are still computed, from their own (changed) inputs
        CHECK_FALSE(rows_equal(base, out, b * S + r, D));
    }

  // valid_len == seq everywhere is the unmasked layer, bit for bit.
  const tlb::CaseSpec full = make_case(2, S, D, 4, 64, 2, MaskKind::padding, {9, 9});
  const tlb::CaseSpec open = make_case(2, S, D, 4, 64, 2, MaskKind::none);
  CHECK(oracle::stack_forward(full, DType::fp16) == oracle::stack_forward(open, DType::fp16));
}

TEST_CASE("LayerNorm rows have mean beta-shifted zero and variance var/(var+eps)", "[oracle]") {
  const int64_t rows = 6, cols = 40;
  // Rows of very different scale and offset, including ones whose variance is near eps.
  std::vector<double> x = random_vector(rows * cols, 7);
  const double scales[rows] = {1.0, 1e-3, 3e-3, 50.0, 1e-2, 1.0};
  const double offsets[rows] = {0.0, 1.0, -20.0, 1e3, 0.5, -1e4};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) x[r * cols + j] = x[r * cols + j] * scales[r] + offsets[r];
  const double eps = 1e-5;

  auto check_rows = [&](const std::vector<double>& gamma, const std::vector<double>& beta) {
    const std::vector<double> y = oracle::layer_norm(x, rows, cols, gamma, beta, eps);
    for (int64_t r = 0; r < rows; ++r) {
      double mx = 0, vx = 0, mz = 0, vz = 0;
      for (int64_t j = 0; j < cols; ++j) mx += x[r * cols + j] / cols;
      for (int64_t j = 0; j < cols; ++j) vx += std::pow(x[r * cols + j] - mx, 2) / cols;
      std::vector<double> z(cols);
      for (int64_t j = 0; j < cols; ++j) {
        z[j] = (y[r * cols + j] - beta[j]) / gamma[j];
        mz += z[j] / cols;
      }
      for (int64_t j = 0; j < cols; ++j) vz += (z[j] - mz) * (z[j] - mz) / cols;
      // The row mean is only known to the rounding of its own magnitude, |mean| * 1e-16,
      // which is that much relative to the spread of the normalised row.
      const double tol = 1e-13 * (1.0 + std::fabs(mx) / std::sqrt(vx));
      INFO("row " << r << " mean " << mx << " variance " << vx);
      CHECK(std::fabs(mz) < tol);
      CHECK(vz == Approx(vx / (vx + eps)).epsilon(tol));
    }
  };
  check_rows(std::vector<double>(cols, 1.0), std::vector<double>(cols, 0.0));
  const tlb::CaseSpec c = make_case(1, 1, cols, 1, 8, 1, MaskKind::none);
  const oracle::LayerParams p = oracle::generate_layer(c, DType::fp32, 0);
  check_rows(p.ln1_gamma, p.ln1_beta);
  check_rows(p.ln2_gamma, p.ln2_beta);

  // With gamma = 1 and beta = 0 the mean of each row is 0 itself, not just after unshifting.
  const std::vector<double> y =
      oracle::layer_norm(x, rows, cols, std::vector<double>(cols, 1.0), std::vector<double>(cols, 0.0), eps);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0;
    for (int64_t j = 0; j < cols; ++j) m += y[r * cols + j];
    CHECK(std::fabs(m / cols) < 1e-13 * (1.0 + std::fabs(offsets[r]) / scales[r]));
  }
}

TEST_CASE("a two-layer stack equals two one-layer applications with per-layer weights",
          "[oracle]") {
  for (DType dt : {DType::fp16, DType::fp32}) {
    const tlb::CaseSpec c2 = make_case(2, 6, 32, 2, 48, 2, MaskKind::causal);
    std::vector<std::vector<double>> per_layer;
    const std::vector<double> y = oracle::stack_forward(c2, dt, &per_layer);
    REQUIRE(per_layer.size() == 2);
    CHECK(per_layer[1] == y);

    const oracle::LayerParams p0 = oracle::generate_layer(c2, dt, 0);
    const oracle::LayerParams p1 = oracle::generate_layer(c2, dt, 1);
    CHECK(p0.w_ff1 != p1.w_ff1);  // the layers really have their own weights
    const std::vector<double> y0 = oracle::layer_forward(c2.shape, p0, oracle::generate_input(c2, dt));
    const std::vector<double> y1 = oracle::layer_forward(c2.shape, p1, y0);
    CHECK(per_layer[0] == y0);
    CHECK(y == y1);
    CHECK(y0 != y1);

    // Layer 0 of a deeper stack is the one-layer stack: depth does not change the data.
    const tlb::CaseSpec c1 = make_case(2, 6, 32, 2, 48, 1, MaskKind::causal);
    CHECK(oracle::stack_forward(c1, dt) == y0);
  }
}

TEST_CASE("activations match their closed forms", "[oracle]") {
  // High-precision values of 0.5 x (1 + erf(x / sqrt 2)) and of PyTorch's tanh form.
  const struct {
    double x, gelu, gelu_tanh;
  } points[] = {
      {1.0, 0.84134474606854294859, 0.84119199060827670478},
      {-1.0, -0.15865525393145705141, -0.15880800939172329522},
      {2.0, 1.9544997361036415856, 1.9545976940877750188},
      {-3.0, -0.00404969409489028358, -0.0036373920817730188378},
      {0.5, 0.34573123063700655182, 0.34571400982514392204},
      {-0.25, -0.10032341857926906894, -0.10032464929831499977},
      {5.0, 4.999998566742140604, 4.999999770820380337},
  };
  for (const auto& pt : points) {
    INFO("x = " << pt.x);
    CHECK(oracle::activate(Activation::gelu, pt.x) == Approx(pt.gelu).epsilon(1e-14));
    CHECK(oracle::activate(Activation::gelu_tanh, pt.x) == Approx(pt.gelu_tanh).epsilon(1e-14));
    CHECK(oracle::activate(Activation::relu, pt.x) == (pt.x > 0 ? pt.x : 0.0));
  }
  CHECK(oracle::activate(Activation::gelu, 0.0) == 0.0);
  CHECK(oracle::activate(Activation::gelu_tanh, 0.0) == 0.0);
  CHECK(oracle::activate(Activation::relu, -0.0) == 0.0);
  CHECK(oracle::activate(Activation::gelu, 40.0) == 40.0);
  CHECK(oracle::activate(Activation::gelu, -40.0) == Approx(0.0).margin(1e-300));
  // The two GELU forms differ by at most ~4.7e-4 anywhere.
  double worst = 0;
  for (double x = -8; x <= 8; x += 1.0 / 64)
    worst = std::max(worst, std::fabs(oracle::activate(Activation::gelu, x) -
                                      oracle::activate(Activation::gelu_tanh, x)));
  CHECK(worst > 4.6e-4);
  CHECK(worst < 4.8e-4);
}

TEST_CASE("oracle rejects inconsistent shapes and sizes", "[oracle]") {
  tlb::CaseSpec c = make_case(2, 4, 30, 4, 16, 1, MaskKind::none);  // 4 does not divide 30
  CHECK_THROWS_AS(oracle::stack_forward(c, DType::fp32), std::invalid_argument);
  c = make_case(2, 4, 32, 4, 16, 1, MaskKind::padding, {4});  // one valid length for two rows
  CHECK_THROWS_AS(oracle::stack_forward(c, DType::fp32), std::invalid_argument);
  c = make_case(2, 4, 32, 4, 16, 1, MaskKind::padding, {4, 5});  // beyond seq
  CHECK_THROWS_AS(oracle::stack_forward(c, DType::fp32), std::invalid_argument);
  c = make_case(2, 4, 32, 4, 16, 1, MaskKind::none);
  const oracle::LayerParams p = oracle::generate_layer(c, DType::fp32, 0);
  CHECK_THROWS_AS(oracle::layer_forward(c.shape, p, std::vector<double>(10)), std::invalid_argument);
}

TEST_CASE("oracle runs a ViT-sized sequence quickly and finitely in every dtype", "[oracle]") {
  // batch 2, seq 257, d_model 128: what GPU tests use as their larger reference shape.
  const tlb::CaseSpec c = make_case(2, 257, 128, 4, 512, 1, MaskKind::none);
  std::vector<double> prev;
  for (DType dt : {DType::fp32, DType::bf16}) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<double> y = oracle::stack_forward(c, dt);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO("dtype " << tlb::to_string(dt) << " took " << secs << " s");
    CHECK(secs < 5.0);  // a regression to quadratic waste would take far longer
    REQUIRE(y.size() == 2u * 257u * 128u);
    for (double v : y) REQUIRE(std::isfinite(v));
    if (!prev.empty()) {
      // The dtype's rounding of weights and inputs changes the output, but only slightly.
      double num = 0, den = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        num += (y[i] - prev[i]) * (y[i] - prev[i]);
        den += prev[i] * prev[i];
      }
      CHECK(num > 0);
      CHECK(std::sqrt(num / den) < 2e-2);
    }
    prev = y;
  }
}
