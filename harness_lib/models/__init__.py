"""支撑层 models：模型的替身和线路。先读 README.md。"""
