//===- Passes.td - mp passes -------------------------------*- tablegen -*-===//
#ifndef MP_TRANSFORMS_PASSES_TD
#define MP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MPRaise : Pass<"mp-raise", "mlir::ModuleOp"> {
  let summary = "raise decomposed ONNX patterns to named transformer ops";
  let description = [{
    Rewrites the op-by-op form an ONNX export produces into the named ops the
    partitioning passes and kernels work on, then tags every op of a repeated
    transformer block with its layer index (`mp.layer`).

    - `linear`: `matmul(x, W) [+ b]` with a parameter `W` (also `transpose(W)`
      from Gemm's transB) and a parameter bias.
    - `layer_norm`: mean/sub/pow/mean/add/sqrt/div[/mul/add] chains.
    - `rms_norm`: `x * rsqrt(mean(x^2) + eps) * w` (also `/ sqrt`).
    - a norm per part of a split, each with its own weights, concatenated
      back (StableLM 2's per-head LayerNorms): one norm of the whole,
      times the weights stacked along the split axis (plus the biases).
    - `gelu`: erf form `x * 0.5 * (1 + erf(x / sqrt 2))`, tanh form.
    - `silu`: `x * sigmoid(x)`.
    - `embedding`: `gather(W, ids)` on axis 0 of a `[V, H]` parameter.
    - `attention`: `softmax(q·kᵀ·scale [+ mask | where(causal, ·, -inf)])·v`,
      with the head repeat of grouped-query attention folded in.
    - experts' weights stacked in one parameter `[experts, ...]` and applied
      by einsum (`bsd,edf->bsef`, `bsef,efd->bsed`) or by batched matmul
      (`torch.bmm` of the tokens viewed `[experts, tokens, d]`: GPT-OSS,
      Llama 4): a linear per expert against its part of the parameter
      (`part_of`/`part`), the results concatenated along the experts;
      slices or splits of that concatenation along the features (a fused
      gate/up halved by `chunk`) are taken of each expert's output.

    Before:
    ```mlir
    %w = mp.get_param @h.0.mlp.c_fc.weight : tensor<32x128xf32>
    %b = mp.get_param @h.0.mlp.c_fc.bias : tensor<128xf32>
    %0 = mp.matmul %x, %w : (tensor<2x8x32xf32>, tensor<32x128xf32>) -> tensor<2x8x128xf32>
    %1 = mp.add %0, %b : (tensor<2x8x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
    ```
    After:
    ```mlir
    %1 = mp.linear %x, %w, %b {mp.layer = 0 : i64} : (...) -> tensor<2x8x128xf32>
    ```
  }];
  let dependentDialects = ["mp::MPDialect"];
}

def MPSummary : Pass<"mp-summary", "mlir::ModuleOp"> {
  let summary = "print a one-screen summary of an mp module";
  let description = [{
    Prints, to standard output, the model's inputs and outputs, its parameter
    count and bytes, and per transformer layer (`mp.layer`) the count of each
    named transformer op. The IR is not changed. Example:

    ```
    mp summary of gpt2/model.onnx (ONNX opset 17)
      inputs      input_ids: 2x8xi64
      outputs     logits: 2x8x64xf32
      parameters  28 tensors, 27456 values, 107.2 KiB
      layer 0     1 attention, 1 gelu, 2 layer_norm, 4 linear (+13 shape/elementwise ops)
      ...
    ```
  }];
}

def MPTensorParallel : Pass<"mp-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron tensor parallelism: column/row-parallel linears";
  let description = [{
    Rewrites the global graph into the program every rank of a `tp`-way
    `shard.grid` runs (SPMD), with local shapes:

    - a linear whose output feeds, through shape and elementwise ops, the
      heads of an attention or another linear's contracting dimension is
      column-parallel (output features split; a fused QKV linear whose output
      is split into q, k and v is sharded per part, not as one slice, as is
      an expert's fused gate/up, a part of stacked weights, taken in equal
      halves; one whose parts split differently is cut into a linear per
      part); each op passes the split as its rule says (`propagateSplit`:
      a reduction along another dim, every stride-th element of the split
      dim as in GPT-OSS's interleaved gate and up, ...);
    - attention runs on the local heads (query and key/value heads split;
      grouped-query kv heads must divide too);
    - the linear that consumes a sharded activation is row-parallel: its
      partial products are summed by one `shard.all_reduce`, then its bias is
      added once;
    - the token embedding is vocab-parallel (local rows, foreign ids give 0,
      all-reduce) and the LM head is column-parallel over the vocabulary,
      followed by a `shard.all_gather` of the logits.

    Parameters record their sharding (`grid`, `shard_axis`, `shard_groups`);
    the artifact writer stores one shard per rank. A dimension that does not
    divide by `tp` is an error naming it.

    Per transformer layer the forward pass has exactly two all-reduces
    (one in a parallel-attention block, after `mp-merge-partial-sums`).
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1",
           "tensor-parallel size (ranks of the grid)">,
    Option<"gridName", "grid", "std::string",
           /*default=*/"::mp::kDefaultTensorParallelGrid",
           "name of the shard.grid to create (or reuse)">,
  ];
  let dependentDialects = ["mp::MPDialect", "mlir::shard::ShardDialect"];
}

def MPMergePartialSums : Pass<"mp-merge-partial-sums", "mlir::ModuleOp"> {
  let summary = "sum row-parallel partial products before one all-reduce "
                "where two sums meet (parallel attention, mixtures of "
                "experts)";
  let description = [{
    A parallel-attention block (GPT-J, GPT-NeoX, Falcon, Phi-2:
    `x + attn(ln(x)) + mlp(ln(x))`) ends in two row-parallel linears whose
    all-reduced outputs are added. A sum of all-reduces is the all-reduce of
    the sum, so the partial products are added first and reduced once: one
    collective per layer instead of two, as in GPT-NeoX's Megatron-based
    trainer. The adds around them (a tree of `mp.add` of one type, read only
    by each other) are rebuilt as the residual plus the reduced sum plus the
    biases, the form a sequential block has, so that sequence parallelism
    and `mp-fuse-reduced-norms` treat it as they treat every other site:

    ```mlir
    %ra = shard.all_reduce %pa on @tp grid_axes = [0] : tensor<2x8x32xf32> -> tensor<2x8x32xf32>
    %h = mp.add %x, %ra : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
    %rm = shard.all_reduce %pm on @tp grid_axes = [0] : tensor<2x8x32xf32> -> tensor<2x8x32xf32>
    %m = mp.add %rm, %bm : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    %y = mp.add %h, %m : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
    // becomes
    %p = mp.add %pa, %pm : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
    %r = shard.all_reduce %p on @tp grid_axes = [0] : tensor<2x8x32xf32> -> tensor<2x8x32xf32>
    %s = mp.add %r, %bm : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    %y = mp.add %x, %s : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
    ```

    The all-reduces merged are sums over the same grid axes, of the tree's
    type, read only by the tree, in its block and pipeline stage; biases of
    one type are added to each other first. Only the order of the additions
    changes.

    A mixture of experts computed densely sums its experts' outputs each
    scaled by its gate: `all_reduce(p_e) * g_e`. A sum reached through ops
    linear in it (products, views, contractions, sum reductions) whose other
    operands are the same on every rank it sums over (the gates: the router
    is whole) is moved after them, `all_reduce(p_e * g_e)`, where another
    sum is there to merge with; an einsum or sum reduction over a
    concatenation of such sums (stacked experts combined by their gates) is
    first split into one per part. Values the same on every rank added on
    the way (a bias per expert after its all-reduce, GPT-OSS's) are carried
    apart through the ops after them and added to the moved sum:
    `f(all_reduce(p) + c) = all_reduce(f(p)) + f(c)`. A concatenation of
    sums over the same ranks is the sum of the concatenation (one
    collective, the same bytes), and a sum carried that way to a reduction
    that shrinks it (the sum over the experts of their gated outputs) moves
    after the reduction, so it sums fewer bytes. `--mp-parallelize` runs it
    after tensor parallelism.
  }];
  let dependentDialects = ["mp::MPDialect", "mlir::shard::ShardDialect"];
}

def MPSequenceParallel : Pass<"mp-sequence-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron sequence parallelism on top of tensor parallelism";
  let description = [{
    Splits the activations outside the tensor-parallel regions along the
    sequence (the second-to-last dimension of `[..., S, H]`): every
    `shard.all_reduce` of a tensor-parallel region becomes a
    `shard.reduce_scatter` over the sequence, residual adds, layer/RMS norms,
    dropout and other elementwise ops run on the local sequence shard, and a
    `shard.all_gather` over the sequence restores the whole sequence before
    each use that needs it (column-parallel linears, the LM head, the
    function results). A whole tensor meeting a sequence shard (a position
    embedding) is cut with `shard.all_slice`.

    Per transformer layer the forward pass then has exactly two all-gathers
    and two reduce-scatters, moving the same bytes as two all-reduces. Runs
    after `mp-tensor-parallel` (it uses its grid: the one named by `grid`,
    or the module's only `shard.grid`); a sequence length that does not
    divide by the grid size is an error naming it.
  }];
  let options = [
    Option<"gridName", "grid", "std::string", /*default=*/"\"\"",
           "the tensor-parallel shard.grid (default: the module's only one)">,
  ];
  let dependentDialects = ["mp::MPDialect", "mlir::shard::ShardDialect"];
}

def MPFuseEpilogues : Pass<"mp-fuse-epilogues", "mlir::ModuleOp"> {
  let summary = "fold a linear's GELU or SiLU into the linear, as its "
                "GEMM's epilogue";
  let description = [{
    A `gelu` (either form) or `silu` whose input is a linear's result, when
    that is the result's only use, is removed and recorded on the linear as
    its `activation`:

    ```mlir
    %h = mp.linear %x, %w, %b : (...) -> tensor<2x8x128xf32>
    %g = mp.gelu %h : tensor<2x8x128xf32>
    // becomes
    %g = mp.linear %x, %w, %b activation = gelu : (...) -> tensor<2x8x128xf32>
    ```

    The runtime applies it as the GEMM's epilogue (a oneDNN post-op on the
    CPU, while the output tile is in cache) rather than as another pass
    over memory. `--artifact` runs this pass last, after the partitioning
    and training passes, which refuse a fused linear. A train step (a
    module with `mp.backward` ops) is left alone: its gradient reads most
    linears' results anyway, and a forward op that recompute copies into
    the backward must compute bit for bit what its copy does.
  }];
}

def MPShardOutputs : Pass<"mp-shard-outputs", "mlir::ModuleOp"> {
  let summary = "return a result gathered only to be returned as this "
                "rank's shard, gathered when it is written";
  let description = [{
    A function result that is an all_gather over the only axis of a
    one-dimensional grid, used by nothing else (tensor parallelism's logits,
    gathered over the vocabulary), is returned ungathered and marked with
    the gather's axis:

    ```mlir
    %l = mp.linear %h, %w {transpose_weight} : (...) -> tensor<2x8x32xf32>
    %g = shard.all_gather %l on @tp grid_axes = [0] gather_axis = 2
        : tensor<2x8x32xf32> -> tensor<2x8x64xf32>
    return %g : tensor<2x8x64xf32>
    // becomes
    return %l : tensor<2x8x32xf32>   // result attribute mp.shard_axis = 2
    ```

    mp-run gathers such an output over the grid once, when it writes or
    verifies it (as it does a train step's sharded gradients), instead of
    on every run. `--artifact` runs this pass with the fusions, after
    partitioning and before the memory plan. Train steps (autodiff shards
    their gradients itself) and pipeline programs (whose stages pass
    results on) are left alone.
  }];
}

def MPShardInputs : Pass<"mp-shard-inputs", "mlir::ModuleOp"> {
  let summary = "take an input that each rank only cuts as this rank's "
                "block, handed to it by mp-run";
  let description = [{
    A function argument whose every user is a shard.all_slice along one
    axis over the only axis of a one-dimensional grid (tensor parallelism's
    cut of a decoder's cached keys and values, split by heads) becomes this
    rank's block, marked with the slice's axis:

    ```mlir
    func.func @main(%past: tensor<2x4x5x8xf32>) ... {
      %s = shard.all_slice %past on @tp grid_axes = [0] slice_axis = 1
          : tensor<2x4x5x8xf32> -> tensor<2x2x5x8xf32>
    // becomes
    func.func @main(%past: tensor<2x2x5x8xf32> {mp.shard_axis = 1 : i64})
    ```

    mp-run's rank 0 reads the whole input and sends each rank only its
    block, so a rank holds its heads' cache rather than all of it and a
    copy of its block. `--artifact` runs this pass with mp-shard-outputs.
    Train steps (fed from the token file) and pipeline programs are left
    alone.
  }];
}

def MPFoldRowParallelBias : Pass<"mp-fold-row-parallel-bias",
                                  "mlir::ModuleOp"> {
  let summary = "add a row-parallel linear's bias inside each rank's GEMM";
  let description = [{
    Megatron's row-parallel linear sums its ranks' partial products and then
    adds the bias: a pass over the whole output after the collective. Each
    of the t ranks adding b/t in its GEMM's epilogue gives the same sum:

    ```mlir
    %y = mp.linear %x, %w : (...) -> tensor<2x8x64xf32>
    %r = shard.all_reduce %y on @tp grid_axes = [0] : ...
    %o = mp.add %r, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    // becomes
    %h = mp.constant dense<5.000000e-01> : tensor<f32>
    %s = mp.mul %b, %h : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
    %y = mp.linear %x, %w, %s : (...) -> tensor<2x8x64xf32>
    %r = shard.all_reduce %y on @tp grid_axes = [0] : ...
    ```

    The same for `shard.reduce_scatter` (sequence parallelism). Only when t
    is a power of two, so that b/t is exact and only the order of the
    additions changes. Inference programs only (a train step is left
    alone). `--artifact` does not run it unless named: on the CPU it
    measured no faster (the scalings of b it adds cost about what the bias
    adds cost), though in bf16 it is more accurate.
  }];
}

def MPFuseRotary : Pass<"mp-fuse-rotary", "mlir::ModuleOp"> {
  let summary = "fold the decomposed rotary position embedding into one "
                "mp.rotary";
  let description = [{
    Exporters write rotary position embedding as `x * cos + rotate(x) *
    sin` in elementwise and shape ops, each a pass over the heads' memory:

    ```mlir
    %a = mp.mul %x, %cos : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
    %hi = mp.slice %x {starts = array<i64: 0, 0, 0, 4>, ...} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
    %n = mp.neg %hi : tensor<2x4x8x4xf32>
    %lo = mp.slice %x {starts = array<i64: 0, 0, 0, 0>, ...} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
    %r = mp.concat %n, %lo {axis = 3 : i64} : (...) -> tensor<2x4x8x8xf32>
    %b = mp.mul %r, %sin : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
    %y = mp.add %a, %b : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    // becomes
    %y = mp.rotary %x, %cos, %sin {rotary_dim = 8 : i64} : (...) -> tensor<2x4x8x8xf32>
    ```

    `rotate` is `rotate_half` (above: Llama, GPT-NeoX, Phi, Qwen) or GPT-J's
    `rotate_every_two` (strided slices, a reshape to pairs, a concat and a
    reshape back: `interleaved`); either product and the add in either
    operand order. A partial rotary, whose result is concatenated with the
    channels it leaves of the tensor it sliced (GPT-NeoX's quarter of each
    head, Phi's), becomes one `mp.rotary` of that tensor with `rotary_dim`
    the channels it turns. f32 only; cos and sin of `rotary_dim` channels,
    broadcast along the other dims. The result is bitwise the ops it
    replaces. It runs last, on inference programs (a train step is left
    as it is), and `--artifact` runs it by default.
  }];
  let dependentDialects = ["mp::MPDialect"];
}

def MPFuseResidualNorms : Pass<"mp-fuse-residual-norms", "mlir::ModuleOp"> {
  let summary = "fold a residual add and the norm that reads it into one op";
  let description = [{
    An `mp.add` of two operands of its own type whose result a `layer_norm`
    or `rms_norm` reads becomes one op with both results, the sum (for its
    other readers: the next residual add) and the norm of it:

    ```mlir
    %h = mp.add %x, %y : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
    %n = mp.layer_norm %h, %g, %b : (...) -> tensor<2x8x64xf32>
    // becomes
    %h, %n = mp.add_layer_norm %x, %y, %g, %b : (...) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
    ```

    The runtime normalizes the sums while they are in cache instead of
    reading them back from memory in a second kernel; every pre-norm
    transformer layer has two such pairs. Where a device has no fused
    kernel, it runs the add and the norm one after the other. The memory
    plan may put the sum in `%x`'s bytes and the norm in `%y`'s
    (InPlaceOpInterface), so the fusion needs no more arena. f32, bf16 and
    f16 adds fuse (in 16 bits the kernel rounds the sum before normalizing
    it, as the two ops do); the first norm reading the sum whose scale and bias can be
    read at the add (defined before it, or an operand-free `mp.get_param`,
    moved up) is taken; ops in different pipeline chunks are not fused.
    Like `mp-fuse-epilogues`, `--artifact` runs it last, on inference
    programs (a train step is left alone: its backward reads the sum
    anyway, and recompute copies forward ops that must compute bit for bit
    what they copy), and before `mp-plan-memory` (a planned module is an
    error).
  }];
}

def MPFuseReducedNorms : Pass<"mp-fuse-reduced-norms", "mlir::ModuleOp"> {
  let summary = "fold an all-reduce (or sequence parallelism's reduce_scatter "
                "and all_gather), its bias, the residual add and the norm "
                "into one collective";
  let description = [{
    A sum over the ranks (a row-parallel linear's, or a vocab-parallel
    embedding's), the bias added to it, and the residual add and norm that
    read it (an `mp.add_layer_norm` or
    `mp.add_rms_norm`, made by `mp-fuse-residual-norms`) become one op:

    ```mlir
    %r = shard.all_reduce %p on @grid grid_axes = [0] : tensor<2x8x64xf32> -> tensor<2x8x64xf32>
    %rb = mp.add %r, %bo : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    %h, %n = mp.add_layer_norm %x, %rb, %g, %b : (...) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
    // becomes
    %h, %n = mp.all_reduce_add_layer_norm %p, %x, %g bias %b addend %bo {grid = @grid, grid_axis = 0 : i64} : (...) -> (...)
    ```

    Without it every tensor-parallel rank adds and normalizes every row,
    the same work on each; with it, ranks that share memory each sum, add
    and normalize 1/n of the rows and write them into every rank's results
    (others run the all-reduce and then the rest). Every rank gets the bits
    the unfused ops give. The all-reduce must be a sum over one grid axis
    of f32 read only by the bias add (one value per feature) or the
    add-and-norm, in one pipeline chunk, and the residual, bias and norm
    weights the same on every rank (not rank-local: one rank's rows go to
    all).

    Under sequence parallelism the chain is a `shard.reduce_scatter`, the
    bias, the add-and-norm of this rank's slice, and a `shard.all_gather`
    of the norm: it becomes an `mp.reduce_scatter_add_layer_norm` (or
    `_rms_norm`) whose `sum` is the slice and whose norm is gathered. Ranks
    that share memory sum and normalize their own rows and write the norms
    straight into every rank's result (one meeting instead of two
    collectives; others run the reduce_scatter, the rest, then the
    all_gather). The norm must be all-gathered along the scatter dim (a dim
    before the norm's); its other readers (a post-norm model's next
    residual) get this rank's slice of the gathered norm, a
    `shard.all_slice`. Rank-local operands are fine here: each rank
    computes its own rows.

    `--artifact` runs it after
    `mp-fuse-residual-norms`, on inference programs, before
    `mp-plan-memory` (a planned module is an error).
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def MPPlanMemory : Pass<"mp-plan-memory", "mlir::ModuleOp"> {
  let summary = "place every value of the program in one arena";
  let description = [{
    Computes the static memory plan of the entry function
    (mp/Analysis/MemoryPlan.h): each value's live range, from the op that
    defines it to its last use (arguments from the start, results to the
    end), placed first-fit in one arena so that values not live at the same
    time share bytes. Parameters and constants keep storage of their own; a
    view of an arena value (a reshape, an inference dropout) shares its
    source's bytes. The plan is recorded on the IR for the artifact writer,
    which only serializes it:

    ```mlir
    func.func @main(%x: tensor<2x8xf32> {mp.arena_offset = 0 : i64}) -> ...
        attributes {mp.arena_bytes = 192 : i64} {
      %0 = mp.gelu %x {mp.arena_offsets = array<i64: 64>} : tensor<2x8xf32>
    ```

    With `print`, the plan is also printed (offsets, sizes, live ranges and
    the peak), for tests and for reading.
  }];
  let options = [
    Option<"print", "print", "bool", /*default=*/"false",
           "print the plan to standard output">,
  ];
  let dependentDialects = ["mp::MPDialect"];
}

def MPConvertPrecision : Pass<"mp-convert-precision", "mlir::ModuleOp"> {
  let summary = "store parameters and activations in fp16 or bf16";
  let description = [{
    Converts every fp32 parameter, constant and activation of the entry
    function to `dtype` (bf16 or f16; f32 leaves the program as it is);
    kernels still accumulate in fp32. The function's
    fp32 inputs and outputs stay fp32 (a cast at the boundary), and so does
    a cross-entropy loss. Parameters remember their stored type
    (`source_type`), which the artifact writer converts from (rounding to
    nearest even). A finite constant past `dtype`'s range becomes its
    largest finite value, not an infinity (HF's `finfo(float32).min` mask
    fill, multiplied by 0 where keys are kept, must stay 0, not NaN).
  }];
  let options = [
    Option<"dtype", "dtype", "mp::StorageType",
           /*default=*/"mp::StorageType::BF16", "storage type",
           [{::llvm::cl::values(
             clEnumValN(mp::StorageType::BF16, "bf16", "bfloat16"),
             clEnumValN(mp::StorageType::F16, "f16", "IEEE half"),
             clEnumValN(mp::StorageType::F32, "f32", "fp32 (no change)"))}]>,
  ];
  let dependentDialects = ["mp::MPDialect"];
}


def MPLoss : Pass<"mp-loss", "mlir::ModuleOp"> {
  let summary = "append the training loss: mean cross-entropy of the logits";
  let description = [{
    Turns the entry function into the loss of a language model: a new
    integer argument `labels`, of the token ids' type, and the token-level
    mean cross-entropy of the logits against it (as PyTorch's
    `F.cross_entropy`: a label of -100 is ignored), which becomes the
    function's only result, named `loss` (fp32, also under a bf16 program).
    The logits are the float result shaped `ids + [V]`, `ids` the shape of
    the integer argument the embedding reads. Logits gathered over the
    vocabulary (a tensor-parallel LM head) are not gathered any more: the
    loss is `mp.vocab_parallel_cross_entropy` of each rank's slice.
    ```mlir
    func.func @main(%ids: tensor<2x8xi64> {mp.name = "input_ids"},
                    %labels: tensor<2x8xi64> {mp.name = "labels"})
        -> (tensor<f32> {mp.name = "loss"}) {
      ...
      %loss = mp.cross_entropy %logits, %labels : (...) -> tensor<f32>
    ```
  }];
  let dependentDialects = ["mp::MPDialect"];
}

def MPFreeze : Pass<"mp-freeze", "mlir::ModuleOp"> {
  let summary = "mark parameters the train step must not train (buffers)";
  let description = [{
    ONNX stores a PyTorch module's registered buffers (a sinusoidal position
    table, rotary cos/sin caches, ALiBi slopes) as initializers, like its
    parameters: nothing in the file tells them apart. This pass marks the
    named ones `mp.frozen`: mp-autodiff gives them no gradient (a zero
    constant, as for a parameter the loss does not read), so `mp-run
    --train` neither updates nor decays them, as torch.optim skips a buffer.
    `params` lists names or glob patterns (`rotary.*`); one that names no
    parameter is an error listing some that exist.
    ```
    mp-opt model.onnx --mp-freeze="params=pe,layers.*.rotary.*" --mp-train ...
    ```
  }];
  let options = [
    ListOption<"params", "params", "std::string",
               "parameter names or glob patterns to freeze">,
  ];
}

def MPAutodiff : Pass<"mp-autodiff", "mlir::ModuleOp"> {
  let summary = "reverse-mode differentiation: the train step's backward";
  let description = [{
    Differentiates the entry function's only result, a scalar loss, with
    respect to every parameter, appending the backward pass to the function:
    it then returns the loss and one gradient per parameter (in declaration
    order, named `grads/NAME`, NAME the parameter's), with the parameter's
    local type. Each op's derivative rule lives on the op
    (AutodiffOpInterface); values that do not depend on a parameter, or that
    the loss does not depend on, get no adjoint. An op on the path from a
    parameter to the loss without a rule is an error naming it. The
    gradient of a parameter the loss does not read is zeros.
    ```mlir
    %dw = mp.linear_weight_grad %x, %dy : (...) -> tensor<32x96xf32>
    return %loss, %dw, ... : tensor<f32>, tensor<32x96xf32>, ...
    ```
  }];
  let dependentDialects = ["mp::MPDialect"];
}

def MPDataParallel : Pass<"mp-data-parallel", "mlir::ModuleOp"> {
  let summary = "replicate the program over a data-parallel axis";
  let description = [{
    Records the data-parallel layout of a train step on the module
    (`mp.data_parallel`, `mp.zero`): the program (one tensor-parallel group
    of ranks) runs `dp` times, each replica on its own rows of every step's
    global batch (the model's batch is one replica's micro-batch). The
    runtime's optimizer reduces the gradients over the replicas in one flat
    bucket: an all-reduce (`zero=0`), or, as Megatron's distributed
    optimizer, a reduce-scatter so that each replica updates its shard of
    the fp32 master weights and moments, then an all-gather of the updated
    weights (`zero=1`). The program itself is unchanged: gradient buckets and
    optimizer shards are the runtime's memory, as in Megatron's DDP.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", /*default=*/"1",
           "data-parallel size (replicas of the program)">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "0: every replica keeps the whole optimizer state; 1: sharded "
           "over the replicas (ZeRO-1)">,
  ];
  let dependentDialects = ["mp::MPDialect"];
}

def MPPipeline : Pass<"mp-pipeline", "mlir::ModuleOp"> {
  let summary = "cut the layers into pipeline stages and plan the schedule";
  let description = [{
    Cuts the program's layer sequence into `pp`·`vp` chunks (virtual
    stages): the embedding and whatever runs before the first transformer
    layer (`E`), each layer (`t`), and the final norm, LM head and loss
    (`L`), in order. Chunk k runs on rank k mod pp as its chunk k / pp,
    Megatron's interleaved assignment (8 layers, pp=2, vp=2: rank 0 holds
    layers [0,1] and [4,5], rank 1 [2,3] and [6,7]).

    Without `layout` the cut balances the cost model (mp/Analysis/Cost.h:
    FLOPs and bytes of every op, at an H100's ratio of peak FLOP/s to memory
    bandwidth), minimizing the costliest chunk, with the embedding and the
    LM head counted (Megatron's account_for_embedding_in_pipeline_split
    problem). `layout` gives the cut by hand in the spirit of Megatron's
    --pipeline-model-parallel-layout: chunks separated by `|`, each a run of
    `E`, `t` (one layer) and `L`, e.g. "Et|tt|tt|tL" (`t*3` repeats).

    Every op that depends on the program's inputs gets `mp.stage` (its
    virtual stage); ops computed from parameters and constants alone (masks,
    rotary tables, a tied head's transposed weight) get none: each stage
    that reads them computes its own. The module records the plan
    (`mp.pipeline`: pp, vp, microbatches, schedule, layout) after generating
    the schedule (mp/Support/PipelineSchedule.h) and proving it cannot
    deadlock; a schedule that would is an error, as are layers that cannot
    be cut as asked and sizes the schedule cannot run (1F1B with fewer
    microbatches than stages; interleaving with vp < 2 or a microbatch count
    that is not a multiple of pp).

    This is the plan only: the stages are not yet separate programs, and
    the artifact writer refuses a module cut into stages.
  }];
  let options = [
    Option<"pp", "pp", "int64_t", /*default=*/"1",
           "pipeline-parallel size (stages, one rank each)">,
    Option<"vp", "vp", "int64_t", /*default=*/"1",
           "chunks per stage (interleaved schedule)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "microbatches per training step">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b or interleaved">,
    Option<"layout", "layout", "std::string", /*default=*/"\"\"",
           "the cut by hand: chunks of E, t and L separated by |">,
    Option<"timeline", "timeline", "std::string", /*default=*/"\"\"",
           "write the planned timeline of one step to this SVG file (the "
           "cost model's times on an H100)">,
    Option<"printSchedule", "print-schedule", "bool", /*default=*/"false",
           "print each rank's actions (F0.3: forward of chunk 0 on "
           "microbatch 3; B backward; sa/ra send/receive activation, sg/rg "
           "gradient, with the peer rank)">,
  ];
  let dependentDialects = ["mp::MPDialect"];
}

def MPRecompute : Pass<"mp-recompute", "mlir::ModuleOp"> {
  let summary = "activation recompute: marked forward regions re-run in the "
                "backward instead of keeping their values";
  let description = [{
    Marks regions of the forward pass (attribute `mp.recompute = id` on
    their ops) and, in a train step (after `mp-train`), clones each region
    into the backward, just before the first backward op reading it, and
    points the backward at the clones (`mp.recomputed`): what the backward
    keeps from the forward is then each region's inputs, not its
    internals. Megatron's policies: `granularity=full` recomputes whole
    transformer layers (`mp.layer`), `method=uniform` in groups of `layers`
    layers, each group from its input, or `method=block` the first `layers`
    layers of each pipeline stage, one by one; `granularity=selective`
    recomputes core attention (ops with the CoreAttention trait). `ops=`
    recomputes exactly the listed op kinds instead (mnemonics, e.g.
    `ops=attention,gelu`). Under sequence parallelism the all-gathered
    input of a linear is gathered again in the backward rather than kept
    gathered (`regather`, on by default, as Megatron). Dropout inside a
    region replays its mask (the
    clone keeps `seed_id`). Without options the policy `--mp-parallelize`
    recorded on the module (`mp.recompute`) applies, if any.
  }];
  let options = [
    Option<"granularity", "granularity", "std::string", /*default=*/"\"\"",
           "none, selective or full">,
    Option<"method", "method", "std::string", /*default=*/"\"uniform\"",
           "full recompute: uniform or block">,
    Option<"layers", "layers", "int64_t", /*default=*/"1",
           "full recompute: layers per group (uniform) or per stage (block)">,
    ListOption<"ops", "ops", "std::string",
               "recompute exactly these op kinds (mnemonics)">,
    Option<"regatherInputs", "regather", "bool", /*default=*/"true",
           "sequence parallelism: gather a linear's input again in the "
           "backward instead of keeping it gathered (as Megatron does)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def MPReport : Pass<"mp-report", "mlir::ModuleOp"> {
  let summary = "print what a partitioned train step costs each rank";
  let description = [{
    Prints, per pipeline stage (its ranks are alike), parameter, gradient,
    optimizer-state and activation bytes (mixed-precision Adam: 2 + 2 + 12
    bytes per parameter, the 12 divided by dp under ZeRO-1; activations as
    the IR keeps them for the backward, with the schedule's micro-batches
    in flight), one layer's activation bytes beside Korthikanti's closed
    form for the layout's tp, sp and recompute, FLOPs per step (model, and
    hardware with recomputed copies) beside Narayanan's and Korthikanti's
    formulas, collective and point-to-point bytes per rank and step, the
    pipeline bubble, and a predicted step time and MFU on `gpu`; with
    `iteration-time`, the MFU and HFU of that measured time. Run it after
    `--mp-parallelize` and `--mp-train`. The IR is not changed.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "text or json">,
    Option<"gpu", "gpu", "std::string", /*default=*/"\"h100\"",
           "a100, h100 or h200 (16-bit peak, memory and link bandwidth)">,
    Option<"iterationTime", "iteration-time", "double", /*default=*/"0",
           "a measured step time in seconds: report its MFU and HFU">,
    Option<"peakFlops", "peak-flops", "double", /*default=*/"0",
           "the GPU's 16-bit peak FLOP/s (0: the preset's)">,
    Option<"memoryBandwidth", "memory-bandwidth", "double", /*default=*/"0",
           "its memory bandwidth, bytes/s (0: the preset's)">,
    Option<"linkBandwidth", "link-bandwidth", "double", /*default=*/"0",
           "its tensor-parallel link bandwidth, bytes/s (0: the preset's)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def MPAutoPlan : Pass<"mp-auto-plan", "mlir::ModuleOp"> {
  let summary = "search tp, pp, vp, dp, micro-batch, sp and recompute for a "
                "cluster; print the fastest layouts that fit";
  let description = [{
    On a raised, unpartitioned model (the pinned shape's sequence; any
    batch): measures each layer's and the rest's FLOPs, bytes and
    parameters once, prices every layout of `gpus` GPUs in closed form
    (compute on the GPU's peak and bandwidth, tensor-parallel collectives
    over NVLink, pipeline transfers and the gradient all-reduce over the
    network, the bubble; memory as mp-report counts it) and prints the `top`
    fastest that fit in `memory` per GPU, each with its `--mp-parallelize`
    options (the micro-batch size is the batch to pin with --mp-shape).
    `best-only` prints just the fastest's options; `baseline` (e.g.
    "tp=8 sp=true pp=8 vp=3 recompute=selective mbs=1") prices another
    layout with the same model to compare.
  }];
  let options = [
    Option<"gpus", "gpus", "int64_t", /*default=*/"0", "GPUs in the cluster">,
    Option<"memory", "memory", "std::string", /*default=*/"\"80GiB\"",
           "memory per GPU (GiB, GB or MiB)">,
    Option<"gpu", "gpu", "std::string", /*default=*/"\"a100\"",
           "a100, h100 or h200">,
    Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
           "sequences per step">,
    Option<"top", "top", "int64_t", /*default=*/"5", "layouts printed">,
    Option<"bestOnly", "best-only", "bool", /*default=*/"false",
           "print only the fastest layout's --mp-parallelize options">,
    Option<"baseline", "baseline", "std::string", /*default=*/"\"\"",
           "a layout to price beside them">,
  ];
}

def MPPipelineSplit : Pass<"mp-pipeline-split", "mlir::ModuleOp"> {
  let summary = "one function per pipeline chunk and phase";
  let description = [{
    After `mp-pipeline` (and `mp-train`), replaces the program by private
    functions `@forward_k` and `@backward_k` (a train step's), one per chunk
    k (attribute `mp.chunk`), each running the ops of its chunk and phase.
    Their arguments say where each value comes from: `mp.input = i` (the
    program's input i), `mp.recv = id` (value `id` from the neighbouring
    chunk: the previous one forward, the next one backward), `mp.stash =
    id` (what the chunk's forward kept for its backward); their results
    where it goes: `mp.send = id`, `mp.stash = id`, `mp.output = i` (the
    program's result i, with its attributes). A value a later chunk reads
    is relayed by every chunk between, so transfers are between neighbours
    only, as the schedule has them. The gradient of a parameter several
    chunks read (a tied embedding and LM head) is not summed in the
    pipeline: each chunk returns its term as a partial output
    (`mp.partial`), for the runtime to sum once per step between the ranks
    holding them (Megatron's embedding group). Ops on parameters and constants alone
    (no input) are recomputed by each function that reads them; the backward
    of such an op (a position table's gradient) runs in the lowest chunk its
    operands come from.

    This is the compiler's half: the runtime does not run these functions
    yet.
  }];
  let dependentDialects = ["mp::MPDialect", "mlir::func::FuncDialect"];
}

#endif // MP_TRANSFORMS_PASSES_TD
