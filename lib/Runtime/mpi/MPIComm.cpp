//===- MPIComm.cpp - collectives over MPI ---------------------------------===//
#include "mp/Runtime/Comm.h"

#include <mpi.h>

#include <cstdlib>

namespace mp::rt {

namespace {

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32: return MPI_FLOAT;
  case DType::F64: return MPI_DOUBLE;
  case DType::I64: return MPI_INT64_T;
  case DType::I32: return MPI_INT32_T;
  case DType::I8:
  case DType::Bool: return MPI_INT8_T;
  default: return MPI_DATATYPE_NULL;
  }
}

Status check(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return Status::success();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::error(std::string(what) +
                       " failed: " + std::string(text, len));
}

class MPICommunicator : public Communicator {
public:
  explicit MPICommunicator(MPI_Comm comm, bool owned = false)
      : comm(comm), owned(owned) {
    MPI_Comm_rank(comm, &rankId);
    MPI_Comm_size(comm, &ranks);
  }
  ~MPICommunicator() override {
    if (owned)
      MPI_Comm_free(&comm);
  }
  int rank() const override { return rankId; }
  int size() const override { return ranks; }
  const char *backend() const override { return "MPI"; }

  Status send(const Tensor &t, int peer) override {
    return check(MPI_Send(t.data, static_cast<int>(t.bytes()), MPI_BYTE, peer,
                          /*tag=*/0, comm),
                 "MPI_Send");
  }
  Status recv(Tensor &t, int peer) override {
    return check(MPI_Recv(t.data, static_cast<int>(t.bytes()), MPI_BYTE, peer,
                          /*tag=*/0, comm, MPI_STATUS_IGNORE),
                 "MPI_Recv");
  }
  Status split(const std::vector<int64_t> &gridShape, int64_t axis,
               std::unique_ptr<Communicator> &out) override {
    int64_t total = 1;
    for (int64_t d : gridShape)
      total *= d;
    if (total != ranks || axis < 0 ||
        axis >= static_cast<int64_t>(gridShape.size()))
      return Status::error("cannot split " + std::to_string(ranks) +
                           " ranks along axis " + std::to_string(axis) +
                           " of a grid of " + std::to_string(total));
    std::vector<int64_t> coords = gridCoordinates(gridShape, rankId);
    int64_t color = gridColor(gridShape, rankId, axis);
    MPI_Comm sub;
    if (Status s = check(MPI_Comm_split(comm, static_cast<int>(color),
                                        static_cast<int>(coords[axis]), &sub),
                         "MPI_Comm_split");
        !s)
      return s;
    out = std::make_unique<MPICommunicator>(sub, /*owned=*/true);
    return Status::success();
  }

protected:
  Status allReduceRaw(void *data, int64_t count, DType dtype) override {
    if (mpiType(dtype) == MPI_DATATYPE_NULL)
      return Status::error(std::string("all_reduce of ") + dtypeName(dtype) +
                           " is not supported");
    return check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                               mpiType(dtype), MPI_SUM, comm),
                 "MPI_Allreduce");
  }
  Status allGatherRaw(const void *in, void *out, size_t bytes) override {
    return check(MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out,
                               static_cast<int>(bytes), MPI_BYTE, comm),
                 "MPI_Allgather");
  }
  Status reduceScatterRaw(const void *in, void *out, int64_t count,
                          DType dtype) override {
    if (mpiType(dtype) == MPI_DATATYPE_NULL)
      return Status::error(std::string("reduce_scatter of ") +
                           dtypeName(dtype) + " is not supported");
    return check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count),
                                          mpiType(dtype), MPI_SUM, comm),
                 "MPI_Reduce_scatter_block");
  }

private:
  MPI_Comm comm;
  bool owned = false;
  int rankId = 0, ranks = 1;
};

bool started = false;

/// Launched by mpirun (Open MPI, MPICH/PMI or Slurm)?
bool underLauncher() {
  for (const char *var :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"})
    if (std::getenv(var))
      return true;
  return false;
}

} // namespace

bool haveMPI() { return true; }

Status initCommunication(int *argc, char ***argv,
                         std::unique_ptr<Communicator> &out) {
  if (!underLauncher()) {
    out = makeSingleProcessCommunicator();
    return Status::success();
  }
  if (Status s = check(MPI_Init(argc, argv), "MPI_Init"); !s)
    return s;
  started = true;
  out = std::make_unique<MPICommunicator>(MPI_COMM_WORLD);
  return Status::success();
}

void finalizeCommunication() {
  if (started)
    MPI_Finalize();
  started = false;
}

void abortCommunication(int code) {
  if (started)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

bool anyRankFailed(Communicator &comm, bool failed) {
  if (!started || comm.size() == 1)
    return failed;
  int local = failed ? 1 : 0, any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any != 0;
}

} // namespace mp::rt
