"""`python -m serving.model_server --model_name=m --model_base_path=/models/m --rest_api_port=8501`"""
import sys

from serving.model_server.server import main

if __name__ == "__main__":
    sys.exit(main())
