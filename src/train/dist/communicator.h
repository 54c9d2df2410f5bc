// Data-parallel training: how the ranks of one run talk to each other.
//
//   auto comm = dist::make_communicator();  // MPI when started by mpirun (and built with MPI), else one process
//   comm->rank(), comm->world();            // this process is rank r of N
//   dist::allreduce_mean(*comm, grads, n);  // every rank ends with the same mean of the N gradients
//
// The design (docs/distributed.md): every rank holds the whole model and AdamW state, runs forward
// and backward on its own rows of the global batch, and the gradients are averaged with an
// all-reduce before the optimiser step — so the parameters stay identical on every rank without
// ever being sent. Rank 0 alone writes files (checkpoints, metrics, the model) and prints progress.
//
// Only the trainer talks to a Communicator, never a BlockRunner: the all-reduce works the same for
// the CPU, anesim and ANE backends.
//
// Why the sum of every rank's bits is the same on every rank: for two ranks a+b == b+a exactly;
// Open MPI's algorithms for more ranks reduce each element in one place and then distribute it.
// The trainer also compares a hash of the parameters across ranks at every checkpoint (trainer.cpp),
// so a divergence would be reported, not silently trained on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace orion::train::dist {

// What an all-reduce cost so far (bench/RESULTS.md reports these per step).
struct CommStats {
  uint64_t bytes_reduced = 0;  // payload bytes passed to all-reduce by this rank
  uint64_t calls = 0;          // all-reduce calls (buckets)
  double seconds = 0;          // wall time inside collective calls
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual std::string describe() const = 0;  // "1 process" or "MPI, 2 ranks (Open MPI v4.1.4 …)"

  // In place, x[i] = Σ over ranks of x[i]; every rank receives the same bits. Collective: every
  // rank calls it with the same n, in the same order as every other collective.
  virtual void allreduce_sum(float* x, size_t n) = 0;
  virtual void allreduce_sum(double* x, size_t n) = 0;
  // out[r] = rank r's value, on every rank.
  virtual std::vector<uint64_t> allgather(uint64_t value) = 0;
  // Rank `root`'s bytes to every rank (the others' vectors are resized to match).
  virtual void broadcast(std::vector<uint8_t>& bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the run at once (MPI_Abort); for an error only this rank saw.
  [[noreturn]] virtual void abort(int exit_code) = 0;
  // Ends this rank cleanly (MPI_Finalize, exit); for an outcome every rank reached together.
  [[noreturn]] virtual void exit(int exit_code) = 0;

  CommStats stats;
};

// One process, no communication: every call returns its input.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  std::string describe() const override { return "1 process"; }
  void allreduce_sum(float*, size_t) override {}
  void allreduce_sum(double*, size_t) override {}
  std::vector<uint64_t> allgather(uint64_t value) override { return {value}; }
  void broadcast(std::vector<uint8_t>&, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override;
  [[noreturn]] void exit(int exit_code) override;
};

// Gradient buckets: at most this many floats per all-reduce call (4 MiB), so MPI's temporary
// buffers stay small and a bucket's transfer can start while later buckets are still being summed.
constexpr size_t kBucketFloats = size_t(1) << 20;

// x = (Σ over ranks x) / world, in buckets of bucket_floats. Nothing is sent with one rank.
void allreduce_mean(Communicator& comm, float* x, size_t n, size_t bucket_floats = kBucketFloats);

// The process count and this process's rank as the launcher (mpirun, srun, hydra) announced them
// in the environment; 1 and 0 outside a launcher. Read without initialising MPI.
int launcher_world_size();
int launcher_rank();
int launcher_local_size();  // ranks on this host (for the default thread count)

// True when this Orion was built with MPI (CMake found it: ORION_HAVE_MPI).
bool built_with_mpi();

// MPI when started by a launcher and built with MPI; one process otherwise. Started by a launcher
// with more than one process but built without MPI: a Usage error saying so (every rank would
// otherwise train alone on the same data).
std::unique_ptr<Communicator> make_communicator();

#ifdef ORION_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator();  // mpi_communicator.cpp
#endif

}  // namespace orion::train::dist
