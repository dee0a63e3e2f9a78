// The independent oracle: the whole layer stack of docs/design.md §1 in fp64 on the CPU, from
// the same generated (and dtype-rounded) inputs and weights as every GPU path. Plain
// single-threaded loops for the shapes of the tests (batch 2 x seq 257 x d_model 128 takes a
// fraction of a second; cost grows as tokens x d_model x (d_model + d_ff) plus seq^2 per head).
// Every GPU test compares against this.
// Inconsistent shapes or tensor sizes throw std::invalid_argument.
#pragma once

#include <cstdint>
#include <vector>

#include "common/rng.hpp"
#include "common/types.hpp"

namespace tlb::oracle {

// One layer's parameters in double, already rounded to the working dtype.
struct LayerParams {
  std::vector<double> ln1_gamma, ln1_beta;  // [d]
  std::vector<double> w_qkv, b_qkv;         // [3d, d], [3d]
  std::vector<double> w_out, b_out;         // [d, d], [d]
  std::vector<double> ln2_gamma, ln2_beta;  // [d]
  std::vector<double> w_ff1, b_ff1;         // [d_ff, d], [d_ff]
  std::vector<double> w_ff2, b_ff2;         // [d, d_ff], [d]
};

// Generates tensor `t` of `layer` for a case, rounded to `dtype`: the same values the GPU
// generator stores.
std::vector<double> generate(const CaseSpec& c, DType dtype, uint32_t layer, TensorId t);
LayerParams generate_layer(const CaseSpec& c, DType dtype, uint32_t layer);
std::vector<double> generate_input(const CaseSpec& c, DType dtype);  // [batch, seq, d]

// Element count of tensor `t` for a shape.
int64_t tensor_elements(const LayerShape& s, TensorId t);

// y = layer(x) for one block; x is [batch, seq, d].
std::vector<double> layer_forward(const LayerShape& s, const LayerParams& p,
                                  const std::vector<double>& x);

// The whole stack; if `per_layer` is given it receives each layer's output.
std::vector<double> stack_forward(const CaseSpec& c, DType dtype,
                                  std::vector<std::vector<double>>* per_layer = nullptr);

// Pieces, exposed for property tests.
// y = x · W^T + b with x [rows, in], W [out, in] (PyTorch's layout), b [out] or empty.
std::vector<double> linear(const std::vector<double>& x, int64_t rows, int64_t in,
                           const std::vector<double>& w, const std::vector<double>& b,
                           int64_t out);
std::vector<double> layer_norm(const std::vector<double>& x, int64_t rows, int64_t cols,
                               const std::vector<double>& gamma, const std::vector<double>& beta,
                               double eps);
// q, k, v in [batch, seq, heads*dh] (the packed projection's layout); returns [batch, seq, d].
std::vector<double> attention(const LayerShape& s, const std::vector<double>& q,
                              const std::vector<double>& k, const std::vector<double>& v);
double activate(Activation a, double x);

}  // namespace tlb::oracle
