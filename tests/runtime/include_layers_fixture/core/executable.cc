// Fixture: core including TensorFlow (line 5).
#include "tf_popef_op/runtime/cc/core/executable.h"

#include <vector>
#include "tensorflow/core/framework/tensor.h"
