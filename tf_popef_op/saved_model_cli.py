"""TensorFlow's `saved_model_cli` with the PopefExecute op registered.

    python -m tf_popef_op.saved_model_cli show --dir models/m/1 --all
    python -m tf_popef_op.saved_model_cli run --dir models/m/1 --tag_set serve \\
        --signature_def serving_default --input_exprs 'X=np.ones((3,2),np.float32);Y=...'

TensorFlow's CLI has no option to load op libraries, so `run` (and the concrete-function part
of `show --all`) cannot load a PopEF SavedModel on its own; this loads the op library, then
hands the command line to TensorFlow's own `saved_model_cli` main unchanged.
"""
import sys


def main() -> int:
    import tf_popef_op
    tf_popef_op.load_op_library()   # raises with the reason if the library cannot be loaded
    from tensorflow.python.tools import saved_model_cli
    sys.argv[0] = "saved_model_cli"
    return saved_model_cli.main()


if __name__ == "__main__":
    sys.exit(main())
