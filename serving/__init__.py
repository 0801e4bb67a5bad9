"""TF-Serving-compatible model server for PopEF models (gRPC + REST)."""
