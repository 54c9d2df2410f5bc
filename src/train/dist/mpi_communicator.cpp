// The MPI communicator (built when CMake finds MPI: ORION_HAVE_MPI). One per process: MPI_Init in
// the constructor, MPI_Finalize in the destructor.
//
// Errors: MPI_COMM_WORLD gets MPI_ERRORS_RETURN, so a failed collective (a rank that died, a
// broken link) becomes a Runtime error naming the call instead of MPI's default abort without a
// word about which operation failed. In practice mpirun itself notices a dead rank first, prints
// which one, and ends the others; either way rank 0 never leaves a half-written checkpoint
// (write_file_atomic), so the run resumes from the last one.
#ifdef ORION_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (no C++ bindings to link)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "base/timer.h"
#include "train/dist/communicator.h"

namespace orion::train::dist {
namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw_runtime_error(fmt::format("{} failed: {}", call, text), "mpi",
                      "another rank probably stopped (its own message, or mpirun's, says why); "
                      "resume the run from its last checkpoint with --resume");
}

// Counts above INT_MAX are sent in several calls (MPI counts are int).
constexpr size_t kMaxCount = size_t(INT_MAX / 2);

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Only the main thread calls MPI (the kernels' OpenMP threads never do).
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    MPI_Get_library_version(version, &len);
    library_ = std::string(version, strnlen(version, sizeof(version)));
    if (auto nl = library_.find_first_of("\n,"); nl != std::string::npos) library_.resize(nl);
  }
  ~MpiCommunicator() override { finalize(); }

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string describe() const override {
    return fmt::format("MPI, {} rank{} ({})", world_, world_ == 1 ? "" : "s", library_);
  }

  void allreduce_sum(float* x, size_t n) override { reduce(x, n, MPI_FLOAT, sizeof(float)); }
  void allreduce_sum(double* x, size_t n) override { reduce(x, n, MPI_DOUBLE, sizeof(double)); }

  std::vector<uint64_t> allgather(uint64_t value) override {
    Timer t;
    std::vector<uint64_t> all(static_cast<size_t>(world_));
    check(MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Allgather");
    stats.seconds += t.seconds();
    return all;
  }

  void broadcast(std::vector<uint8_t>& bytes, int root) override {
    uint64_t n = bytes.size();
    check(MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
    bytes.resize(size_t(n));
    for (size_t begin = 0; begin < n; begin += kMaxCount)
      check(MPI_Bcast(bytes.data() + begin, int(std::min<size_t>(kMaxCount, n - begin)), MPI_BYTE, root, MPI_COMM_WORLD),
            "MPI_Bcast");
  }

  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  [[noreturn]] void abort(int exit_code) override {
    std::fflush(stdout), std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }
  [[noreturn]] void exit(int exit_code) override {
    std::fflush(stdout), std::fflush(stderr);
    finalize();
    std::exit(exit_code);
  }

 private:
  void reduce(void* x, size_t n, MPI_Datatype type, size_t size) {
    Timer t;
    for (size_t begin = 0; begin < n; begin += kMaxCount)
      check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(x) + begin * size, int(std::min(kMaxCount, n - begin)), type,
                          MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
    stats.seconds += t.seconds();
    stats.bytes_reduced += n * size;
    ++stats.calls;
  }
  void finalize() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }

  int rank_ = 0, world_ = 1;
  bool owns_ = false;
  std::string library_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace orion::train::dist
#endif  // ORION_HAVE_MPI
