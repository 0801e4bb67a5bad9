"""Serving PopEF models with TensorFlow.

    serving.export         PopEF -> SavedModel whose signatures call the PopefExecute op
                           (`popef-export` / `python -m serving.export`; docs/tensorflow_serving.md)
    serving.model_server   TF-Serving-compatible model server (gRPC + REST)
"""
