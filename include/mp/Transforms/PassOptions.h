//===- PassOptions.h - types of the mp passes' options ----------*- C++ -*-===//
#ifndef MP_TRANSFORMS_PASSOPTIONS_H
#define MP_TRANSFORMS_PASSOPTIONS_H

namespace mp {

/// The name of the shard.grid tensor parallelism creates, by default.
inline constexpr char kDefaultTensorParallelGrid[] = "tp";

/// The element type parameters and activations are stored in.
enum class StorageType { F32, BF16, F16 };

} // namespace mp

#endif // MP_TRANSFORMS_PASSOPTIONS_H
