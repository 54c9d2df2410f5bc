// The single-process communicator, bucketed all-reduce, and which communicator a process gets.
#include "train/dist/communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "base/timer.h"

namespace orion::train::dist {

void SingleProcess::abort(int exit_code) {
  std::fflush(stdout), std::fflush(stderr);
  std::_Exit(exit_code);
}

void SingleProcess::exit(int exit_code) { std::exit(exit_code); }

void allreduce_mean(Communicator& comm, float* x, size_t n, size_t bucket_floats) {
  if (comm.world() == 1) return;
  const float inv_world = 1.0f / float(comm.world());
  bucket_floats = std::max<size_t>(1, bucket_floats);
  for (size_t begin = 0; begin < n; begin += bucket_floats) {
    const size_t count = std::min(bucket_floats, n - begin);
    comm.allreduce_sum(x + begin, count);
    // The same multiplication on every rank of the same sum: the mean stays identical everywhere.
    for (size_t i = begin; i < begin + count; ++i) x[i] *= inv_world;
  }
}

namespace {
// The first of these variables the environment holds, as an integer; `fallback` when none.
int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names)
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return fallback;
}
}  // namespace

// Open MPI's mpirun, then PMIx/PMI launchers (MPICH's hydra, Slurm's srun).
int launcher_world_size() { return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}, 1); }
int launcher_rank() { return env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, 0); }
int launcher_local_size() { return env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}, 1); }

bool built_with_mpi() {
#ifdef ORION_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_communicator() {
  const int launched = launcher_world_size();
#ifdef ORION_HAVE_MPI
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK"))
    return make_mpi_communicator();
#endif
  if (launched > 1)
    throw_usage_error(fmt::format("started as one of {} processes, but this orion was built without MPI: every process "
                                  "would train alone on the same data",
                                  launched),
                      "",
                      "install Open MPI (scripts/setup.sh: openmpi-bin libopenmpi-dev), reconfigure and rebuild, "
                      "or run orion train without mpirun");
  return std::make_unique<SingleProcess>();
}

}  // namespace orion::train::dist
