// Fixture for test_runtime_include_layers.py: a base header (no includes).
#pragma once
