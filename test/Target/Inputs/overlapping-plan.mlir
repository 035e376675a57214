// Input of plan-errors.test: %0 and %1 are both live when the neg runs but
// share offset 0.
func.func @main(%x: tensor<2x64xf32> {mp.arena_offset = 512 : i64}) -> tensor<2x64xf32> attributes {mp.arena_bytes = 1024 : i64} {
  %0 = mp.exp %x {mp.arena_offsets = array<i64: 0>} : tensor<2x64xf32>
  %1 = mp.tanh %0 {mp.arena_offsets = array<i64: 0>} : tensor<2x64xf32>
  %2 = mp.add %0, %1 {mp.arena_offsets = array<i64: 512>} : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x64xf32>
  return %2 : tensor<2x64xf32>
}
