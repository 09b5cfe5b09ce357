// Ending a job from one failing rank: the message goes to stderr with the rank and host,
// and MPI_Abort ends every rank instead of leaving the others waiting in a collective.
// MPI only (target axonn_mpi_check), so MPI tools without LibTorch use it too.
//
//   catch (const axonn::Error& e) { axonn::runtime::abort_job(e.what(), axonn::exit_code(e)); }
#pragma once

#include <string>

namespace axonn::runtime {

// Prints "axonn: rank R on host H: <message>" to stderr and ends every rank with
// MPI_Abort(MPI_COMM_WORLD, exit_code) (std::_Exit outside MPI). Never returns.
[[noreturn]] void abort_job(const std::string& message, int exit_code);

}  // namespace axonn::runtime
