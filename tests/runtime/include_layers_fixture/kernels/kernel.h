// Fixture: the kernel interface with a back-edge into core/ (line 4).
#pragma once
#include "tf_popef_op/runtime/cc/base/error.h"
#include "tf_popef_op/runtime/cc/core/executable.h"
