"""Message classes and gRPC stubs generated from the upstream `.proto` files in
third_party/proto/ (see its README) by build_protos.py when the package is built."""
