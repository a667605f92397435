"""clocks"""
