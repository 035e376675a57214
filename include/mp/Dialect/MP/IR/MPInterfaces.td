//===- MPInterfaces.td - facts the passes ask the ops -------*- tablegen -*-===//
#ifndef MP_DIALECT_MP_IR_MPINTERFACES_TD
#define MP_DIALECT_MP_IR_MPINTERFACES_TD

include "mlir/IR/OpBase.td"

def MP_SplitOpInterface : OpInterface<"SplitOpInterface"> {
  let cppNamespace = "::mp";
  let description = [{
    How a tensor split into equal contiguous blocks along one dimension (one
    block per rank) passes through the op: the rule of running the op on each
    rank's blocks. Tensor parallelism (splits along features and heads),
    sequence parallelism (splits along the sequence) and the summary ask the
    op instead of keeping lists of op names; the backward rules of the next
    passes live on the ops the same way.

    `propagateSplit` takes, for each operand, the dimension it is split along
    (-1: whole) and answers, when the op can run on such blocks, a
    `SplitMapping`: the dimension each operand must be split along (a whole
    operand that spans the split, such as a position table added to a
    sequence-split activation, must be cut too; what that costs is the
    pass's choice) and the dimension each result is split along. It fails
    when the op cannot run on these splits (a reduction along the split
    dimension, operands split along dimensions that do not line up).

    The default implementation answers from the op's traits: `Elementwise`
    ops keep the split, `ResultsBroadcastableShape` ops align it to the
    result's rank. Other ops implement the method.
  }];
  let methods = [
    InterfaceMethod<[{
        The split of every operand and result when the op runs on operands
        split along `operandDims` (-1: whole), or failure.
      }],
      "::mlir::FailureOr<::mp::SplitMapping>", "propagateSplit",
      (ins "::llvm::ArrayRef<int64_t>":$operandDims), [{}], [{
        return ::mp::detail::propagateSplitByTraits($_op, operandDims);
      }]>,
  ];
}


def MP_AutodiffOpInterface : OpInterface<"AutodiffOpInterface"> {
  let cppNamespace = "::mp";
  let description = [{
    The op's derivative rule for reverse-mode differentiation (mp-autodiff),
    in the spirit of Enzyme-MLIR's `ReverseAutoDiffOpInterface`: given the
    adjoint (gradient of the loss) of each result, build the adjoint of each
    operand at the builder's insertion point, reading the op's own operands
    and results where the rule needs them (those values then live from the
    forward to the backward pass: what the memory plan and recompute see).

    `resultAdjoints[i]` is null when result `i` does not reach the loss;
    `needed[j]` says whether operand `j` needs an adjoint (it depends on a
    parameter): the rule sets `operandAdjoints[j]` for those (null only
    where the gradient is zero) and may leave the others null. Adjoints have
    their value's type. A rule fails, with a diagnostic on the op, for a
    case it does not cover.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the adjoints of the operands `needed` asks for from the
        adjoints of the results.
      }],
      "::mlir::LogicalResult", "buildAdjoints",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultAdjoints,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandAdjoints)>,
  ];
}

def MP_InPlaceOpInterface : OpInterface<"InPlaceOpInterface"> {
  let cppNamespace = "::mp";
  let description = [{
    An op whose kernel may write a result over exactly the bytes of one of
    its operands (an elementwise kernel that reads each element before it
    writes it). The memory plan places the result there when nothing reads
    the operand after the op; the artifact contract lists the same pairs
    (MP_IN_PLACE), and the runtime accepts no other overlap. The pairs are
    the contract's, read by the op's name, so the plan and the runtime's
    check cannot disagree.
  }];
  let methods = [
    InterfaceMethod<[{
        The operand whose bytes result `result` may take, if any.
      }],
      "std::optional<unsigned>", "getInPlaceOperand", (ins "unsigned":$result),
      [{}], [{
        return ::mp::detail::contractInPlaceOperand($_op.getOperation(),
                                                    result);
      }]>,
  ];
}

def MP_LeadingDimOpInterface : OpInterface<"LeadingDimOpInterface"> {
  let cppNamespace = "::mp";
  let description = [{
    Whether dimension 0 of the op's results is a batch dimension (each
    slice along it is computed from the matching slices of some operands
    alone), and the op rebuilt with that dimension unfolded into several.
    Exporters of HF's BART, OPT, Whisper and BLOOM attention merge batch
    and heads into one dimension ([B, H, S, d] -> [B*H, S, d]) around
    batched matmuls and the softmax; mp-raise sinks such merges through
    the ops that answer here, until each meets the reshape that undoes it,
    so attention is raised, and split by heads, in its [B, H, S, d] form.

    The default implementation answers from the op's traits: `Elementwise`
    and `ResultsBroadcastableShape` ops are batched along every dimension;
    an operand of the results' rank whose dimension 0 is not 1 has it, the
    others broadcast along it.
  }];
  let methods = [
    InterfaceMethod<[{
        The operands whose dimension 0 is the results' dimension 0 (they
        are unfolded with it); the others are read as they are. Failure
        when the results' dimension 0 is not a batch dimension of the op (a
        softmax along it, a transpose that moves it).
      }],
      "::mlir::FailureOr<::llvm::SmallVector<unsigned>>",
      "getLeadingDimOperands", (ins), [{}], [{
        return ::mp::detail::leadingDimOperandsByTraits($_op.getOperation());
      }]>,
    InterfaceMethod<[{
        Builds the op at the builder's point on `operands` (those
        `getLeadingDimOperands` lists with dimension 0 unfolded into
        `leading`, the others as they were), its results' dimension 0
        unfolded into `leading` likewise.
      }],
      "::mlir::Operation *", "buildUnfolded",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$operands,
           "::llvm::ArrayRef<int64_t>":$leading), [{}], [{
        return ::mp::detail::buildUnfoldedClone($_op.getOperation(), builder,
                                                operands, leading);
      }]>,
  ];
}

def MP_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mp";
  let description = [{
    The floating-point work of one run of an op whose work is not one
    operation per result element: contractions and attention, counted as 2
    FLOPs per multiply-add by the formulas the runtime reports throughput
    with (mp/Support/Flops.h). The cost model (pipeline stages, the report)
    counts every other op by its result elements.
  }];
  let methods = [
    InterfaceMethod<[{
        FLOPs of one run of the op, from its operand and result types.
      }],
      "double", "getFlops", (ins)>,
  ];
}

#endif // MP_DIALECT_MP_IR_MPINTERFACES_TD
