// The threads one rank computes on. LibTorch's intra-op pool is one; a BLAS with a pool
// of its own (OpenBLAS's pthreads build, which the Debian LibTorch calls for fp32
// products) is another, sized by default to every core of the machine, and
// at::set_num_threads does not reach it. Every rank of an emulated cluster then ran its
// fp32 products on 2 threads of the development machine's 2 cores, whatever axrun's
// --threads said (docs/validation.md, "The BLAS's own threads").
//
// Example:
//   axonn::runtime::set_compute_threads(1);     // every entry point, before any product
//   int t = axonn::runtime::blas_threads();     // 1; -1 with a BLAS that has no pool of its own
#pragma once

namespace axonn::runtime {

// Sets LibTorch's intra-op threads and, where the loaded BLAS has a pool of its own
// (OpenBLAS), that pool's size, to `threads` (>= 1; InternalError otherwise).
void set_compute_threads(int threads);

// The loaded BLAS's own pool size: OpenBLAS's openblas_get_num_threads(), or -1 where
// the BLAS has none (MKL follows LibTorch's setting).
int blas_threads();

}  // namespace axonn::runtime
