//===- Dataflow.h - checking a program's use of the arena ---------*- C++
//-*-===//
#ifndef MP_LIB_RUNTIME_DATAFLOW_H
#define MP_LIB_RUNTIME_DATAFLOW_H

#include "mp/Program/program.pb.h"
#include "mp/Runtime/Tensor.h"

#include <vector>

namespace mp::rt {

/// Checks the program's arena as a verifier would, by following which
/// buffer's bytes every arena range holds as the instructions run: each
/// instruction reads only values still intact (written earlier by an
/// instruction, an input, or a view of one: a buffer no instruction writes
/// sharing its source's bytes exactly), writes no result over one of its
/// operands, and every output is intact at the end. A swapped, deleted or
/// hand-edited instruction, or a plan that overlaps two live values, is an
/// error naming the instruction and buffers, not stale data.
/// `bytes[i]` is buffer i's size.
Status checkDataflow(const program::Program &prog,
                     const std::vector<int64_t> &bytes);

} // namespace mp::rt

#endif // MP_LIB_RUNTIME_DATAFLOW_H
