// Fixture: core including downwards, fine.
#pragma once
#include "tf_popef_op/runtime/cc/kernels/kernel.h"
