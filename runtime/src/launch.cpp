// Launcher detection; see axonn/runtime/launch.hpp.
#include "axonn/runtime/launch.hpp"

#include "axonn/common/error.hpp"

namespace axonn::runtime {
namespace {

int number(const std::function<const char*(const char*)>& getenv, const char* name, int fallback) {
  const char* v = getenv(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    int x = std::stoi(v, &used);
    if (used != std::string(v).size() || x < 0) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    throw InputError("launch", std::string("environment variable ") + name + "=\"" + v + "\"", "launcher environment",
                "a non-negative integer");
  }
}

}  // namespace

LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv) {
  struct Scheme {
    const char *launcher, *rank, *size, *local;
  };
  for (const Scheme& s : {Scheme{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                          Scheme{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
                          Scheme{"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}}) {
    if (!getenv(s.rank) || !getenv(s.size)) continue;
    LaunchInfo l;
    l.launcher = s.launcher;
    l.rank = number(getenv, s.rank, 0);
    l.size = number(getenv, s.size, 1);
    l.local_rank = number(getenv, s.local, 0);
    if (l.size < 1 || l.rank >= l.size)
      throw InputError("launch", "rank " + std::to_string(l.rank) + " of " + std::to_string(l.size),
                  std::string(s.rank) + "/" + s.size, "0 <= rank < size");
    return l;
  }
  return LaunchInfo{};
}

}  // namespace axonn::runtime
