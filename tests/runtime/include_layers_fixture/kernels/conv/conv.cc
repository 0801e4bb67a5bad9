// Fixture: one op family including another (line 3).
#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/tiles.h"
