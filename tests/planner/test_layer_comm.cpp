// One fully-connected layer's communication by hand (docs/model.md section 3).
#include <gtest/gtest.h>

#include "axonn/planner/layer_comm.hpp"

using namespace axonn;
using namespace axonn::planner;

namespace {

// k=1024, n=4096, m=8192 tokens, Gx=2, Gy=4, Gz=2, Gdata=2; X 100, Y 50, Z 25, data 10 GB/s;
// bf16 collectives, fp32 gradient all-reduce, 2 all-gathers, 2 forward all-reduces.
struct Fixture {
  topo::Grid grid{2, 4, 2, 2, 1};
  AxisBandwidths bw{100e9, 50e9, 25e9, 1e9, 10e9};
  LayerCommSettings s;
  model::Layer layer;
  Fixture() {
    s.tokens = 8192;
    s.all_gathers = 2;
    s.forward_all_reduces = 2;
    layer.k = 1024;
    layer.n = 4096;
  }
};

}  // namespace

TEST(LayerComm, NormalLayerByHand) {
  Fixture f;
  auto c = layer_comm(f.layer, f.grid, f.bw, f.s);
  // weight block = 2 B * 1024*4096/(2*4) = 1048576 B; AG/RS over Z (p=2, 25 GB/s)
  EXPECT_DOUBLE_EQ(c.ag_z, 2 * 0.5 * 1048576 / 25e9);
  EXPECT_DOUBLE_EQ(c.rs_z, 0.5 * 1048576 / 25e9);
  // forward: 2 x AR over X (p=2) of 2*8192*4096/(4*2) = 8388608 B at 100 GB/s
  EXPECT_DOUBLE_EQ(c.ar_x, 2 * (2 * 0.5 * 8388608 / 100e9));
  // backward: AR over Y (p=4) of 2*8192*1024/(2*2) = 4194304 B at 50 GB/s
  EXPECT_DOUBLE_EQ(c.ar_y, 2 * 0.75 * 4194304 / 50e9);
  // data: AR (p=2) of 4*1024*4096/(2*4*2) = 1048576 B at 10 GB/s
  EXPECT_DOUBLE_EQ(c.ar_data, 2 * 0.5 * 1048576 / 10e9);
  EXPECT_EQ(c.p2p_pipe, 0.0);
  EXPECT_NEAR(c.total(), 4.194304e-5 + 2.097152e-5 + 1.6777216e-4 + 1.2582912e-4 + 1.048576e-4, 1e-15);
}

TEST(LayerComm, TransposedLayerSwapsXAndY) {
  Fixture f;
  f.layer.role = model::LinearRole::Row;
  auto c = layer_comm(f.layer, f.grid, f.bw, f.s);
  // W is k/Gy x n/Gx: the same block size, so the Z terms are unchanged
  EXPECT_DOUBLE_EQ(c.ag_z, 2 * 0.5 * 1048576 / 25e9);
  EXPECT_DOUBLE_EQ(c.rs_z, 0.5 * 1048576 / 25e9);
  // forward: 2 x AR over Y (p=4) of 2*8192*4096/(Gx*Gz = 4) = 16777216 B at 50 GB/s
  EXPECT_DOUBLE_EQ(c.ar_y, 2 * (2 * 0.75 * 16777216 / 50e9));
  // backward: AR over X (p=2) of 2*8192*1024/(Gy*Gz = 8) = 2097152 B at 100 GB/s
  EXPECT_DOUBLE_EQ(c.ar_x, 2 * 0.5 * 2097152 / 100e9);
  EXPECT_DOUBLE_EQ(c.ar_data, 2 * 0.5 * 1048576 / 10e9);
}

TEST(LayerComm, MicroBatchesMultiplyTensorParallelTermsButNotData) {
  Fixture f;
  auto one = layer_comm(f.layer, f.grid, f.bw, f.s);
  f.s.microbatches = 4;
  auto four = layer_comm(f.layer, f.grid, f.bw, f.s);
  EXPECT_DOUBLE_EQ(four.ag_z, 4 * one.ag_z);
  EXPECT_DOUBLE_EQ(four.rs_z, 4 * one.rs_z);
  EXPECT_DOUBLE_EQ(four.ar_x, 4 * one.ar_x);
  EXPECT_DOUBLE_EQ(four.ar_y, 4 * one.ar_y);
  EXPECT_DOUBLE_EQ(four.ar_data, one.ar_data);
}

TEST(LayerComm, EmbeddingHasNoInputGradientAndAttentionIsFree) {
  Fixture f;
  f.layer.kind = model::LayerKind::Embedding;  // split as a row-parallel layer
  f.s.input_gradient = false;
  f.s.forward_all_reduces = 1;
  auto c = layer_comm(f.layer, f.grid, f.bw, f.s);
  EXPECT_EQ(c.ar_x, 0.0);  // no backward all-reduce
  EXPECT_DOUBLE_EQ(c.ar_y, 2 * 0.75 * 16777216 / 50e9);

  model::Layer att;
  att.kind = model::LayerKind::Attention;
  att.heads = 16;
  att.head_dim = 64;
  EXPECT_EQ(layer_comm(att, f.grid, f.bw, f.s).total(), 0.0);
}
