// Fixture: a family header.
#pragma once
#include "tf_popef_op/runtime/cc/kernels/kernel.h"
